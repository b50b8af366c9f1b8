import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { ConfigError, type ConfigRule, OptionsRegistry, type RawEntry } from '../config/registry';
import { parseUrl, type OptionDef, type OptionValueMap } from '../config/types';
import { JobRefusedError } from './registration-error';
import type {
  DelegationTokenManagerCallback,
  DelegationTokenProvider,
  JobConfiguration,
  JobContext,
  ObtainedDelegationTokens,
  ProviderConfig,
} from './token-spi';

/** Root of every provider's options (Flink's `DelegationTokenProvider.CONFIG_PREFIX`). */
export const PROVIDER_CONFIG_PREFIX = 'security.delegation.token.provider';

/**
 * Root of the keys a *job* sets in its own configuration to ask a built-in provider for something
 * (`security.delegation.job.<provider>.<what>`). A convention, not a rule: each provider declares
 * its keys (`jobRequestKeys`), and a declared key reaches it wherever it lives; an undeclared key
 * whose name Flink counts as sensitive ("token", "secret", ...) is removed from the job's
 * configuration before any provider sees it.
 */
export const JOB_REQUEST_PREFIX = 'security.delegation.job';

/** What the composition root hands a built-in provider. Both are optional so tests can omit them. */
export interface ProviderDeps {
  /** Wall clock, epoch ms. Expiries are absolute times, so this is `Date.now` in production. */
  now?: () => number;
  log?: Logger;
  /** PEM CA bundle for the providers' outbound https (private endpoints); undefined = system CAs. */
  ca?: string | undefined;
}

/**
 * A built-in provider as the composition root sees it: its service name, its options (merged into
 * the one options registry, so they are validated, documented and redacted with the rest) and a
 * factory.
 */
export interface BuiltInTokenProvider {
  serviceName: string;
  options: readonly OptionDef[];
  /**
   * Rules across the provider's options, evaluated by the options registry at start-up with every
   * other problem, and again by `readProviderOptions` in `init` (a provider built outside the gateway).
   */
  rules?: readonly ConfigRule[];
  create(deps?: ProviderDeps): DelegationTokenProvider;
}

/** `security.delegation.token.provider.<service>.<relative>` */
export function providerKey(serviceName: string, relative: string): string {
  return `${PROVIDER_CONFIG_PREFIX}.${serviceName}.${relative}`;
}

/** The heading a built-in provider's options stand under in docs/configuration.md. */
export function providerSection(serviceName: string): string {
  return `Delegation tokens: ${serviceName}`;
}

/** Default of every provider's `timeout` option. */
export const PROVIDER_TIMEOUT_DEFAULT_MS = 30_000;

/**
 * The `timeout` option of a provider that calls out during an obtain cycle:
 * `security.delegation.token.provider.<service>.timeout`, a duration, default 30 s. `call` names
 * one such call for the description ("one STS call"); the same wording for every provider.
 */
export function providerTimeoutOption(serviceName: string, call: string): OptionDef<'duration'> {
  return {
    key: providerKey(serviceName, 'timeout'),
    type: 'duration',
    default: PROVIDER_TIMEOUT_DEFAULT_MS,
    min: 1,
    section: providerSection(serviceName),
    description: `How long ${call} may take before the obtain cycle fails (and is retried by the manager).`,
  };
}

/** A provider's option definitions by property name (the array form is `Object.values(...)`). */
export type OptionDefs = Record<string, OptionDef>;

/** The parsed values of `OptionDefs`: each typed after its definition, `undefined` when unset. */
export type ParsedOptions<D extends OptionDefs> = {
  [K in keyof D]: D[K] extends OptionDef<infer T> ? OptionValueMap[T] | undefined : never;
};

/**
 * Reads a provider's declared options through its `ProviderConfig` (raw strings) with the options
 * registry itself — the same parsing, item checks and `rules` the gateway's start-up applies — and
 * applies defaults. So a provider built outside the gateway (a test, another host) gets the same
 * verdicts; every problem is reported at once (`ConfigError`, `GW_CONFIG_INVALID`), and the value of
 * a sensitive option is never echoed.
 */
export function readProviderOptions<D extends OptionDefs>(
  serviceName: string,
  defs: D,
  config: ProviderConfig,
  rules: readonly ConfigRule[] = [],
): ParsedOptions<D> {
  const prefix = `${PROVIDER_CONFIG_PREFIX}.${serviceName}.`;
  const raw = new Map<string, RawEntry>();
  for (const def of Object.values(defs)) {
    if (!def.key.startsWith(prefix)) throw new Error(`option ${def.key} is not under ${prefix}`);
    const value = config.get(def.key.slice(prefix.length));
    if (value !== undefined && value.trim() !== '') raw.set(def.key, { value, source: 'configuration' });
  }
  const resolved = new OptionsRegistry(Object.values(defs), rules, []).resolve(raw);
  const out: Record<string, unknown> = {};
  for (const [name, def] of Object.entries(defs)) out[name] = resolved.getOptional(def);
  return out as ParsedOptions<D>;
}

const isSet = (v: unknown) => v !== undefined && v !== '';

/**
 * Whether a group of options is configured: false when none is set, true when all are. A half-set
 * group is a configuration problem that `allOrNoneRule` reports at resolve time; here it counts as
 * not configured.
 */
export function allOrNone(values: readonly unknown[]): boolean {
  return values.length > 0 && values.every(isSet);
}

/** A rule: the options of a group are set together or not at all (a half key pair fails start-up). */
export function allOrNoneRule(defs: readonly OptionDef[], what: string): ConfigRule {
  return {
    keys: defs.map((d) => d.key),
    description: `set all or none (${what}).`,
    check(config) {
      const set = defs.map((d) => isSet(config.getOptional(d)));
      if (!set.includes(true) || !set.includes(false)) return [];
      const given = defs.filter((_, i) => set[i]).map((d) => d.key);
      return defs.filter((_, i) => !set[i]).map((d) => ({ key: d.key, message: `must be set together with ${given.join(', ')}` }));
    },
  };
}

/** A job configuration value, trimmed; `undefined` when absent or blank. */
export function jobValue(jobConfiguration: JobConfiguration, key: string): string | undefined {
  const v = jobConfiguration[key];
  if (v === undefined) return undefined;
  const t = v.trim();
  return t === '' ? undefined : t;
}

/** Splits a Flink list (`a;b`; commas are accepted too), dropping blanks and duplicates, sorted. */
export function splitList(text: string): string[] {
  return [
    ...new Set(
      text
        .split(/[;,]/)
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ].sort();
}

/**
 * The item check of a provider's endpoint option (type `url`): plain http is allowed only to
 * loopback hosts (test servers, a local sidecar): elsewhere the tokens, and for OAuth the client
 * secret, would cross the network in clear.
 */
export function httpsUnlessLoopback(text: string): string | undefined {
  const url = new URL(text);
  return url.protocol === 'http:' && !isLoopback(url.hostname)
    ? `must use https:// (plain http is allowed only for loopback hosts, not ${url.hostname})`
    : undefined;
}

/**
 * An endpoint as a URL: the option's value (already checked by the registry) or a default built
 * from other options (`https://sts.<region>.amazonaws.com`), which gets the same checks here.
 */
export function parseEndpoint(key: string, text: string): URL {
  let problem: string | undefined;
  try {
    problem = httpsUnlessLoopback(parseUrl(text));
  } catch (err) {
    problem = (err as Error).message;
  }
  if (problem !== undefined) throw new ConfigError([{ key, source: 'configuration', message: problem }]);
  return new URL(text.trim());
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** An endpoint for messages: origin and path, without query string or userinfo. */
export function displayUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/**
 * A cycle's result: the payload as UTF-8 JSON (the format of every built-in provider), and
 * `validUntil` only when there is one (absent = no renewal scheduled).
 */
export function obtainedTokens(payload: unknown, validUntil: number | undefined): ObtainedDelegationTokens {
  const tokens = new TextEncoder().encode(JSON.stringify(payload));
  return validUntil === undefined ? { tokens } : { tokens, validUntil };
}

/** The earliest of some epoch-ms expiries, `undefined` when there are none. */
export function earliest(expiries: Iterable<number>): number | undefined {
  let min: number | undefined;
  for (const e of expiries) if (min === undefined || e < min) min = e;
  return min;
}

/**
 * Per-job state shared by the built-in providers: the ordering rule of the SPI (record the job's
 * state, *then* ask for a re-obtain) and idempotency live here once. A re-registration with the
 * same request does not trigger another cycle.
 */
/**
 * An administrator's allow-list, each entry for everyone (`raw-events`) or for one principal
 * (`token:team-a=raw-events`, `cert:flink-operator=arn:aws:iam::1:role/x`): a job may ask for an
 * item only when an entry for everyone or for its submitting principal lists it. So one submitter
 * cannot ask for the containers, roles or scopes meant for another. `gateway:cluster-default=<item>`
 * gives an item to jobs registered with the cluster default scope only.
 */
export class PrincipalAllowList {
  private readonly everyone = new Set<string>();
  private readonly byPrincipal = new Map<string, Set<string>>();

  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const entry = raw.trim();
      // `gateway:cluster-default` is the reserved principal of jobs nobody registered (job graphs,
      // discovered jobs; docs/adr/0010): its entries are the cluster default scope.
      const m = /^((?:token|cert):[^=]+|gateway:cluster-default)=(.+)$/.exec(entry);
      if (!m) {
        if (entry !== '') this.everyone.add(entry);
        continue;
      }
      const principal = m[1]!.trim();
      if (!this.byPrincipal.has(principal)) this.byPrincipal.set(principal, new Set());
      this.byPrincipal.get(principal)!.add(m[2]!.trim());
    }
  }

  allows(principal: string, item: string): boolean {
    return this.everyone.has(item) || this.byPrincipal.get(principal)?.has(item) === true;
  }
}

export class JobRegistry<S> {
  private readonly jobs = new Map<string, S>();

  constructor(private readonly same: (a: S, b: S) => boolean) {}

  /** Records `state` for `jobId`; returns true when it is new or changed (the caller then re-obtains). */
  put(jobId: string, state: S): boolean {
    const previous = this.jobs.get(jobId);
    this.jobs.set(jobId, state);
    return previous === undefined || !this.same(previous, state);
  }

  delete(jobId: string): void {
    this.jobs.delete(jobId);
  }

  has(jobId: string): boolean {
    return this.jobs.has(jobId);
  }

  get size(): number {
    return this.jobs.size;
  }

  /** A copy, so an obtain cycle works on a stable view while jobs come and go. */
  snapshot(): Map<string, S> {
    return new Map(this.jobs);
  }

  clear(): void {
    this.jobs.clear();
  }
}

/** Removes every occurrence of each secret from a message (defence in depth for echoed values). */
export function scrub(message: string, secrets: readonly (string | undefined)[]): string {
  let out = message;
  for (const s of secrets) if (s !== undefined && s.length >= 4) out = out.split(s).join('[redacted]');
  return out;
}

/** Reads a response body as UTF-8, refusing more than `maxBytes` (a token answer is small). */
export async function readLimited(body: Dispatcher.ResponseData['body'], maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      body.destroy();
      throw new Error(`the answer exceeds ${maxBytes} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The frame every built-in provider shares: one state per registered job, the manager's callback,
 * the closed flag, and the SPI's ordering rule (record the job, then ask for a cycle). A provider
 * says how it configures itself (`configure`: undefined = inactive), what a job asks of it
 * (`stateFor`: throws to refuse the job, undefined = nothing to track) and how it obtains tokens for
 * the jobs it tracks (`obtainFor`).
 */
export abstract class JobScopedProvider<S, C> implements DelegationTokenProvider {
  abstract readonly jobRequestKeys: readonly string[];
  protected settings: C | undefined;
  protected readonly jobs: JobRegistry<S>;
  protected readonly now: () => number;
  protected readonly log: Logger | undefined;
  /** PEM CA bundle for the provider's outbound https; undefined = system CAs. */
  protected readonly ca: string | undefined;
  private callback: DelegationTokenManagerCallback | undefined;
  private closed = false;

  constructor(
    readonly serviceName: string,
    deps: ProviderDeps,
    sameState: (a: S, b: S) => boolean,
    /** The info line when a job's state is recorded or changed. */
    private readonly registeredMessage: string,
  ) {
    this.jobs = new JobRegistry<S>(sameState);
    this.now = deps.now ?? Date.now;
    this.log = deps.log?.child({ provider: serviceName });
    this.ca = deps.ca;
  }

  /** The provider's settings from its options; undefined leaves it inactive. */
  protected abstract configure(config: ProviderConfig): C | undefined;
  /** What the job asks for, checked against the allow-lists (throw to refuse); undefined: nothing to track. */
  protected abstract stateFor(jobConfiguration: JobConfiguration, context: JobContext, settings: C | undefined): S | undefined;
  /** Tokens for the jobs in `jobs` (a snapshot); skip a job that `this.jobs` no longer has when the answer comes. */
  protected abstract obtainFor(settings: C, jobs: ReadonlyMap<string, S>): Promise<ObtainedDelegationTokens>;
  /** The fields of the registered-job log line. */
  protected abstract describe(state: S): Record<string, unknown>;

  init(config: ProviderConfig, callback: DelegationTokenManagerCallback): void {
    this.callback = callback;
    this.settings = this.configure(config);
  }

  delegationTokensRequired(): boolean {
    return this.settings !== undefined && this.jobs.size > 0;
  }

  registerJob(jobId: string, jobConfiguration: JobConfiguration, context: JobContext = { principal: 'anonymous' }): void {
    this.ensureOpen();
    const state = this.stateFor(jobConfiguration, context, this.settings);
    if (state === undefined) {
      this.jobs.delete(jobId);
      return;
    }
    // Record first, then ask: the cycle the callback schedules must see this job (SPI ordering rule).
    if (this.jobs.put(jobId, state)) {
      this.log?.info({ jobId, ...this.describe(state) }, this.registeredMessage);
      this.callback?.reobtainDelegationTokens();
    }
  }

  unregisterJob(jobId: string): void {
    this.jobs.delete(jobId);
  }

  async obtainDelegationTokens(): Promise<ObtainedDelegationTokens> {
    this.ensureOpen();
    const settings = this.settings;
    if (settings === undefined) throw new Error(`the ${this.serviceName} provider is not configured; it has no tokens to obtain`);
    return this.obtainFor(settings, this.jobs.snapshot());
  }

  async close(): Promise<void> {
    this.closed = true;
    this.jobs.clear();
    await this.release();
  }

  /** Releases what the settings hold (connection pools, signers) at close. */
  protected async release(): Promise<void> {}

  private ensureOpen(): void {
    if (this.closed) throw new JobRefusedError(`the ${this.serviceName} provider is closed`);
  }
}
