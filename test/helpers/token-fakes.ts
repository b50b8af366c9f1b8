import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { createRegistry } from '../../src/composition';
import type { Configuration, RawEntry } from '../../src/config/registry';
import type {
  DelegationTokenManagerCallback,
  DelegationTokenProvider,
  DelegationTokenReceiver,
  JobConfiguration,
  ObtainedDelegationTokens,
  ProviderConfig,
  TokenContainer,
  TokenManagerListener,
} from '../../src/plugin-kit/token-spi';

export function tokenConfig(options: Record<string, string> = {}): Configuration {
  const raw = new Map<string, RawEntry>();
  for (const [k, v] of Object.entries(options)) raw.set(k, { value: v, source: 'test' });
  return createRegistry().resolve(raw);
}

/** A logger whose lines are kept as parsed JSON. */
export function captureLogger(): { log: Logger; lines: Record<string, unknown>[]; messages: (level?: string) => string[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const levels: Record<string, number> = { debug: 20, info: 30, warn: 40, error: 50 };
  return {
    log: pino({ level: 'debug' }, sink),
    lines,
    messages: (level) => lines.filter((l) => level === undefined || l.level === levels[level]).map((l) => String(l.msg)),
  };
}

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export const bytes = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'utf8'));

/**
 * A provider whose behaviour each test sets: `obtain` (default: tokens `<name>-<n>` valid for an hour
 * on the manager's wall clock), `register`/`unregister` hooks; it records every call.
 */
export class FakeProvider implements DelegationTokenProvider {
  inits = 0;
  obtains = 0;
  closes = 0;
  required: boolean | (() => boolean) = true;
  config: ProviderConfig | undefined;
  callback: DelegationTokenManagerCallback | undefined;
  readonly registered: { jobId: string; conf: JobConfiguration; principal?: string }[] = [];
  readonly unregistered: string[] = [];
  readonly jobs = new Set<string>();
  obtain: (n: number) => ObtainedDelegationTokens | Promise<ObtainedDelegationTokens> = (n) => ({
    tokens: bytes(`${this.serviceName}-${n}`),
  });
  register: ((jobId: string, conf: JobConfiguration) => void | Promise<void>) | undefined;
  unregister: ((jobId: string) => void | Promise<void>) | undefined;
  initImpl: (() => void | Promise<void>) | undefined;

  constructor(
    readonly serviceName: string,
    readonly jobRequestKeys: readonly string[] = [],
  ) {}

  async init(config: ProviderConfig, callback: DelegationTokenManagerCallback): Promise<void> {
    this.inits++;
    this.config = config;
    this.callback = callback;
    await this.initImpl?.();
  }

  delegationTokensRequired(): boolean {
    return typeof this.required === 'function' ? this.required() : this.required;
  }

  async obtainDelegationTokens(): Promise<ObtainedDelegationTokens> {
    this.obtains++;
    return this.obtain(this.obtains);
  }

  async registerJob(jobId: string, conf: JobConfiguration, context?: { principal: string }): Promise<void> {
    this.registered.push({ jobId, conf, ...(context ? { principal: context.principal } : {}) });
    await this.register?.(jobId, conf);
    this.jobs.add(jobId);
  }

  async unregisterJob(jobId: string): Promise<void> {
    this.unregistered.push(jobId);
    this.jobs.delete(jobId);
    await this.unregister?.(jobId);
  }

  async close(): Promise<void> {
    this.closes++;
  }
}

export class FakeReceiver implements DelegationTokenReceiver {
  inits = 0;
  readonly received: string[] = [];
  onNew: ((tokens: Uint8Array) => void | Promise<void>) | undefined;
  initImpl: (() => void | Promise<void>) | undefined;

  constructor(
    readonly serviceName: string,
    readonly jobRequestKeys: readonly string[] = [],
  ) {}

  async init(): Promise<void> {
    this.inits++;
    await this.initImpl?.();
  }

  async onNewTokensObtained(tokens: Uint8Array): Promise<void> {
    this.received.push(Buffer.from(tokens).toString('utf8'));
    await this.onNew?.(tokens);
  }
}

/** A listener that records the decoded containers it gets. */
export class RecordingListener implements TokenManagerListener {
  readonly containers: Record<string, string>[] = [];
  fail: Error | undefined;

  onNewTokensObtained(container: TokenContainer): void {
    if (this.fail) throw this.fail;
    const decoded: Record<string, string> = {};
    for (const [k, v] of Object.entries(container.tokens)) decoded[k] = Buffer.from(v, 'base64').toString('utf8');
    this.containers.push(decoded);
  }
}

/** Providers and matching receivers for the given names. */
export function pairs(...names: string[]): { providers: FakeProvider[]; receivers: FakeReceiver[] } {
  return { providers: names.map((n) => new FakeProvider(n)), receivers: names.map((n) => new FakeReceiver(n)) };
}
