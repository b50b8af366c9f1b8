import { BulkHttpClient, redactUri, type FsPluginDefinition, type PluginContext } from '../../src/plugin-kit';
import { createGuardedDispatcher, hasProxy, proxySettingsFrom } from './guarded-dispatcher';
import { HttpFileSystem } from './http-file-system';
import { httpOptions } from './options';

export { HttpFileSystem } from './http-file-system';
export { httpOptions } from './options';

/**
 * Builds the HTTP(S) filesystem. `env` supplies HTTPS_PROXY / HTTP_PROXY / NO_PROXY (read once,
 * here); tests pass their own instead of mutating `process.env`.
 */
export function createHttpFileSystem(ctx: PluginContext, env: NodeJS.ProcessEnv = process.env): HttpFileSystem {
  const { config, log, guard, ca } = ctx;
  const headers = validHeaders(config.getOptional(httpOptions.headers) ?? {});
  const settings = {
    rawHttpEnabled: config.get(httpOptions.rawHttpEnabled),
    headers,
    headerHosts: config
      .get(httpOptions.headersHosts)
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
    maxRedirects: config.get(httpOptions.maxRedirects),
    connectTimeoutMs: config.get(httpOptions.connectTimeout),
    readTimeoutMs: config.get(httpOptions.readTimeout),
  };
  if (Object.keys(headers).length > 0 && settings.headerHosts.length === 0) {
    log.warn('user.artifacts.http-headers is set but gateway.artifacts.http-headers.hosts is empty: the headers are never sent');
  }
  const proxy = proxySettingsFrom(env);
  if (hasProxy(proxy)) {
    // redactUri drops the proxy's userinfo (its credentials).
    log.info(
      {
        httpsProxy: proxy.httpsProxy && redactUri(proxy.httpsProxy),
        httpProxy: proxy.httpProxy && redactUri(proxy.httpProxy),
        noProxy: proxy.noProxy,
      },
      'HTTP(S) jar downloads go through a proxy',
    );
  }
  const dispatcher = createGuardedDispatcher({
    guard,
    ca,
    connectTimeoutMs: settings.connectTimeoutMs,
    readTimeoutMs: settings.readTimeoutMs,
    proxy,
  });
  // Without a proxy, the bulk client (ADR 0035); undici serves proxied requests.
  const bulk = hasProxy(proxy)
    ? undefined
    : new BulkHttpClient({ guard, ca, connectTimeoutMs: settings.connectTimeoutMs, readTimeoutMs: settings.readTimeoutMs });
  return new HttpFileSystem({ dispatcher, ...(bulk ? { bulk } : {}), guard, settings, log, checkTargetsBeforeProxy: hasProxy(proxy) });
}

/** Header names are lower-cased once; the option's check (`headerProblems`) refused bad ones at start-up. */
function validHeaders(raw: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(raw).map(([name, value]) => [name.toLowerCase(), value]));
}

/**
 * HTTP(S) jar URIs, including presigned S3 and Azure SAS URLs (plain HTTPS GETs whose query carries
 * the signature; it never appears in messages or logs). `http://` only with
 * `user.artifacts.raw-http-enabled: true`.
 */
export const httpPlugin: FsPluginDefinition = {
  name: 'http',
  schemes: ['https', 'http'],
  options: Object.values(httpOptions),
  create: (ctx) => createHttpFileSystem(ctx),
};
