import { getCACertificates } from 'node:tls';
import { buildConnector } from 'undici';
import { type ConnectGuard, guardedConnection } from './connect-guard';

/**
 * The trust store for a plugin's TLS connections with `gateway.artifacts.ca-bundle` (`ctx.ca`): Node's
 * default store plus the bundle. A `ca` option alone would replace the default store, and the
 * bundle is documented as trusted in addition to it. Undefined when no bundle is set.
 */
export function trustedCa(ca: string | undefined): string[] | undefined {
  return ca === undefined ? undefined : [...getCACertificates('default'), ca];
}

/**
 * An undici connector that applies the restricted-host guard to every connection
 * (`guardedConnection`: IP literals checked at once, names at connect time, with the
 * connection's own port). HTTP/1.1 only: one large
 * sequential download gains nothing from h2, and h1 is undici's most mature path.
 */
export function guardedConnector(guard: ConnectGuard, opts: { ca: string | undefined; timeoutMs: number }): buildConnector.connector {
  const ca = trustedCa(opts.ca);
  const tlsOptions = ca === undefined ? {} : { ca };
  const byPort = new Map<number, buildConnector.connector>();
  return (target, callback) => {
    let guarded: ReturnType<typeof guardedConnection>;
    try {
      guarded = guardedConnection(guard, target);
    } catch (err) {
      callback(err as Error, null);
      return;
    }
    let connector = byPort.get(guarded.port);
    if (connector === undefined) {
      connector = buildConnector({ ...tlsOptions, timeout: opts.timeoutMs, lookup: guarded.lookup, allowH2: false });
      byPort.set(guarded.port, connector);
    }
    connector(target, callback);
  };
}
