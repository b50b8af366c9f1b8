import { getCACertificates } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import type { ConnectGuard } from '../../src/artifacts/fs-plugin';

/** Connect phase limit: a black-holed endpoint fails in 10 s instead of the OS's minutes. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** Headers and body inactivity limit; without it a body that stalls after the headers hangs forever (storage.md §7). */
export const READ_TIMEOUT_MS = 60_000;

/**
 * The undici Agent that GetObject bodies are read through. Every connection passes the
 * restricted-host guard with its own port (the exemption list is per host:port): `checkHost` for IP
 * literals, which Node connects to without a lookup, and the guard's `lookup` for names, which
 * checks every resolved address at connect time (no check-then-connect race).
 */
export function createGuardedAgent(guard: ConnectGuard, extraCa: string | undefined): Agent {
  // A `ca` option replaces Node's trust store; a private CA should be trusted in addition to it.
  const tlsOptions = extraCa === undefined ? {} : { ca: [...getCACertificates('default'), extraCa] };
  const connectors = new Map<number, buildConnector.connector>();
  const connect: buildConnector.connector = (target, callback) => {
    const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
    try {
      guard.checkHost(target.hostname, port);
    } catch (err) {
      callback(err as Error, null);
      return;
    }
    let connector = connectors.get(port);
    if (connector === undefined) {
      // HTTP/1.1 only: one large sequential download gains nothing from h2.
      connector = buildConnector({ ...tlsOptions, timeout: CONNECT_TIMEOUT_MS, lookup: guard.lookupFor(port), allowH2: false });
      connectors.set(port, connector);
    }
    connector(target, callback);
  };
  return new Agent({ connect, headersTimeout: READ_TIMEOUT_MS, bodyTimeout: READ_TIMEOUT_MS, allowH2: false });
}
