import { getCACertificates } from 'node:tls';
import { Agent, buildConnector, EnvHttpProxyAgent, type Dispatcher } from 'undici';
import type { ConnectGuard } from '../../src/artifacts/fs-plugin';

/** Proxy settings, read once from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, or lower case). */
export interface ProxySettings {
  httpsProxy?: string;
  httpProxy?: string;
  noProxy?: string;
}

export function proxySettingsFrom(env: NodeJS.ProcessEnv): ProxySettings {
  // Lower case first, as curl and undici do.
  const pick = (name: string) => (env[name.toLowerCase()] ?? env[name])?.trim() || undefined;
  return { httpsProxy: pick('HTTPS_PROXY'), httpProxy: pick('HTTP_PROXY'), noProxy: pick('NO_PROXY') };
}

export function hasProxy(p: ProxySettings): boolean {
  return p.httpsProxy !== undefined || p.httpProxy !== undefined;
}

export interface GuardedDispatcherOptions {
  guard: ConnectGuard;
  /** Extra trusted CA (PEM), added to Node's default store; undefined = default store only. */
  ca?: string;
  connectTimeoutMs: number;
  readTimeoutMs: number;
  proxy: ProxySettings;
}

/**
 * The undici dispatcher of the HTTP plugin. Direct connections go through a connector that applies
 * the restricted-host guard with the *connection's* port (the exemption list is per host:port):
 * `checkHost` for IP literals, which Node connects to without a lookup, and the guard's `lookup`
 * for names, which checks every resolved address. With a proxy, the socket goes to the proxy and
 * the proxy resolves the target, so the caller must check the target itself before each request
 * (see `HttpFileSystem`); the proxy, configured by the administrator, is not subject to the guard.
 */
export function createGuardedDispatcher(opts: GuardedDispatcherOptions): Dispatcher {
  // A `ca` option replaces Node's trust store; a private CA should be trusted in addition to it.
  const ca = opts.ca === undefined ? undefined : [...getCACertificates('default'), opts.ca];
  const tlsOptions = ca === undefined ? {} : { ca };
  const connectors = new Map<number, buildConnector.connector>();
  const connectorFor = (port: number): buildConnector.connector => {
    let connector = connectors.get(port);
    if (connector === undefined) {
      // HTTP/1.1 only: one large sequential download gains nothing from h2, and h1 is undici's most mature path.
      connector = buildConnector({ ...tlsOptions, timeout: opts.connectTimeoutMs, lookup: opts.guard.lookupFor(port), allowH2: false });
      connectors.set(port, connector);
    }
    return connector;
  };
  const connect: buildConnector.connector = (target, callback) => {
    const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
    try {
      opts.guard.checkHost(target.hostname, port);
    } catch (err) {
      callback(err as Error, null);
      return;
    }
    connectorFor(port)(target, callback);
  };
  const common = { headersTimeout: opts.readTimeoutMs, bodyTimeout: opts.readTimeoutMs, allowH2: false };
  if (!hasProxy(opts.proxy)) return new Agent({ ...common, connect });
  return new EnvHttpProxyAgent({
    ...common,
    connect, // used for NO_PROXY targets
    connectTimeout: opts.connectTimeoutMs,
    // Empty strings stop undici from falling back to process.env: these settings were read once, at create.
    httpProxy: opts.proxy.httpProxy ?? '',
    httpsProxy: opts.proxy.httpsProxy ?? '',
    noProxy: opts.proxy.noProxy ?? '',
    requestTls: { ...tlsOptions, allowH2: false },
    proxyTls: tlsOptions,
  });
}
