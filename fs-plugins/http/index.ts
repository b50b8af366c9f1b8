import { ConfigError, redactUri, type FsPluginDefinition, type PluginContext } from '../../src/artifacts/plugin-kit';
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
    headerHosts: config.get(httpOptions.headersHosts).map((h) => h.trim().toLowerCase()).filter(Boolean),
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
      { httpsProxy: proxy.httpsProxy && redactUri(proxy.httpsProxy), httpProxy: proxy.httpProxy && redactUri(proxy.httpProxy), noProxy: proxy.noProxy },
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
  return new HttpFileSystem({ dispatcher, guard, settings, log, checkTargetsBeforeProxy: hasProxy(proxy) });
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Header names must be HTTP tokens and values must not break lines; problems name the header, never its value. */
function validHeaders(raw: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  const problems: string[] = [];
  for (const [name, value] of Object.entries(raw)) {
    if (!TOKEN.test(name)) problems.push(`'${name}' is not a valid header name`);
    else if (/[\r\n\0]/.test(value)) problems.push(`the value of '${name}' contains a line break or NUL`);
    else out[name.toLowerCase()] = value;
  }
  if (problems.length > 0) {
    throw new ConfigError(problems.map((message) => ({ key: httpOptions.headers.key, source: 'configuration', message })));
  }
  return out;
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
