import { Agent, EnvHttpProxyAgent, type Dispatcher } from 'undici';
import { guardedConnector, trustedCa, type ConnectGuard } from '../../src/plugin-kit';

/** Proxy settings, read once from the environment (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, or lower case). */
export interface ProxySettings {
  httpsProxy?: string | undefined;
  httpProxy?: string | undefined;
  noProxy?: string | undefined;
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
  ca?: string | undefined;
  connectTimeoutMs: number;
  readTimeoutMs: number;
  proxy: ProxySettings;
}

/**
 * The undici dispatcher of the HTTP plugin. Direct connections go through the plugin kit's guarded
 * connector (the restricted-host guard with the connection's port). With a proxy, the socket goes to the proxy and
 * the proxy resolves the target, so the caller must check the target itself before each request
 * (see `HttpFileSystem`); the proxy, configured by the administrator, is not subject to the guard.
 */
export function createGuardedDispatcher(opts: GuardedDispatcherOptions): Dispatcher {
  const ca = trustedCa(opts.ca);
  const tlsOptions = ca === undefined ? {} : { ca };
  const connect = guardedConnector(opts.guard, { ca: opts.ca, timeoutMs: opts.connectTimeoutMs });
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
