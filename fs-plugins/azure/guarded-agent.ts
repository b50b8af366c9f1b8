import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import { trustedCa, isGatewayError, type ConnectGuard, type GatewayError } from '../../src/artifacts/plugin-kit';

type Oncreate = (err: Error | null, socket: Duplex) => void;

/**
 * Remembers the guard's refusals by `host:port`. The SDK turns any socket error into a RestError
 * that keeps only `message` and `code`; this lets the plugin rethrow the guard's own GatewayError.
 */
export class RefusalLog {
  private readonly byHostPort = new Map<string, GatewayError>();

  record(host: string, port: number, err: unknown): void {
    if (!isGatewayError(err)) return;
    if (this.byHostPort.size > 256) this.byHostPort.clear(); // bounded; it is only a message cache
    this.byHostPort.set(hostPort(host, port), err);
  }

  find(host: string, port: number): GatewayError | undefined {
    return this.byHostPort.get(hostPort(host, port));
  }
}

function hostPort(host: string, port: number): string {
  return `${host.toLowerCase().replace(/^\[|\]$/g, '')}:${port}`;
}

/**
 * Applies the connect guard to every socket an agent opens, so it also covers redirects and
 * retries: IP literals go through `checkHost` (Node does not call `lookup` for them), names through
 * `lookupFor(port)`, which checks every resolved address.
 */
function guardedCreateConnection(
  guard: ConnectGuard,
  refusals: RefusalLog,
  defaultPort: number,
  create: (options: http.ClientRequestArgs, oncreate?: Oncreate) => Duplex | null | undefined,
) {
  return (options: http.ClientRequestArgs, oncreate?: Oncreate): Duplex | null | undefined => {
    const host = options.host ?? options.hostname ?? 'localhost';
    const port = Number(options.port ?? defaultPort);
    try {
      guard.checkHost(host, port);
    } catch (err) {
      refusals.record(host, port, err);
      // Asynchronous failure through the agent's callback: the request emits 'error' with it.
      process.nextTick(() => oncreate?.(err as Error, undefined as unknown as Duplex));
      return undefined;
    }
    const guardLookup = guard.lookupFor(port);
    const lookup = ((hostname: string, opts: object, cb: (err: NodeJS.ErrnoException | null, ...rest: unknown[]) => void) =>
      guardLookup(hostname, opts, (err: NodeJS.ErrnoException | null, ...rest: unknown[]) => {
        if (err) refusals.record(hostname, port, err);
        (cb as (...args: unknown[]) => void)(err, ...rest);
      })) as unknown as LookupFunction;
    return create({ ...options, lookup }, oncreate);
  };
}

class GuardedHttpAgent extends http.Agent {
  constructor(private readonly guard: ConnectGuard, private readonly refusals: RefusalLog) {
    super({ keepAlive: true });
  }

  override createConnection(options: http.ClientRequestArgs, oncreate?: Oncreate): Duplex | null | undefined {
    return guardedCreateConnection(this.guard, this.refusals, 80, (o, cb) => super.createConnection(o, cb))(options, oncreate);
  }
}

class GuardedHttpsAgent extends https.Agent {
  constructor(private readonly guard: ConnectGuard, private readonly refusals: RefusalLog, ca: string | undefined) {
    super({ keepAlive: true, ...(ca === undefined ? {} : { ca: trustedCa(ca) }) });
  }

  override createConnection(options: http.ClientRequestArgs, oncreate?: Oncreate): Duplex | null | undefined {
    return guardedCreateConnection(this.guard, this.refusals, 443, (o, cb) => super.createConnection(o, cb))(options, oncreate);
  }
}

/** The two keep-alive agents of one file system, guarded; `destroy` closes their pooled sockets. */
export interface GuardedAgents {
  http: http.Agent;
  https: https.Agent;
  refusals: RefusalLog;
  forProtocol(protocol: string): http.Agent;
  destroy(): void;
}

export function createGuardedAgents(guard: ConnectGuard, ca: string | undefined): GuardedAgents {
  const refusals = new RefusalLog();
  const agents = { http: new GuardedHttpAgent(guard, refusals), https: new GuardedHttpsAgent(guard, refusals, ca) };
  return {
    ...agents,
    refusals,
    forProtocol: (protocol) => (protocol === 'https:' ? agents.https : agents.http),
    destroy: () => {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}
