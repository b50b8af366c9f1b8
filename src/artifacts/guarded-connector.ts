import { getCACertificates } from 'node:tls';
import { buildConnector } from 'undici';
import type { ConnectGuard } from './fs-plugin';

/**
 * The trust store for a plugin's TLS connections with `gateway.artifacts.ca-bundle` (`ctx.ca`): Node's
 * default store plus the bundle. A `ca` option alone would replace the default store, and the
 * bundle is documented as trusted in addition to it. Undefined when no bundle is set.
 */
export function trustedCa(ca: string | undefined): string[] | undefined {
  return ca === undefined ? undefined : [...getCACertificates('default'), ca];
}

/**
 * An undici connector that applies the restricted-host guard to every connection with the
 * *connection's* port (the exemption list is per host:port): `checkHost` for IP literals, which
 * Node connects to without a lookup, and the guard's `lookupFor(port)` for names, which checks
 * every resolved address at connect time (no check-then-connect race). HTTP/1.1 only: one large
 * sequential download gains nothing from h2, and h1 is undici's most mature path.
 */
export function guardedConnector(guard: ConnectGuard, opts: { ca: string | undefined; timeoutMs: number }): buildConnector.connector {
  const ca = trustedCa(opts.ca);
  const tlsOptions = ca === undefined ? {} : { ca };
  const byPort = new Map<number, buildConnector.connector>();
  return (target, callback) => {
    const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
    try {
      guard.checkHost(target.hostname, port);
    } catch (err) {
      callback(err as Error, null);
      return;
    }
    let connector = byPort.get(port);
    if (connector === undefined) {
      connector = buildConnector({ ...tlsOptions, timeout: opts.timeoutMs, lookup: guard.lookupFor(port), allowH2: false });
      byPort.set(port, connector);
    }
    connector(target, callback);
  };
}
