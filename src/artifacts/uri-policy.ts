import { GatewayError } from '../errors/gateway-error';
import type { PluginRegistry } from './plugin-registry';
import { redactUri } from '../plugin-kit/uri';

const HINTS: Record<string, string> = {
  http: 'Prefer https; to allow plain http add it to gateway.artifacts.allowed-schemes and set user.artifacts.raw-http-enabled: true.',
  file: 'file:// is for development: add it to gateway.artifacts.allowed-schemes and set gateway.artifacts.local-file.enabled: true.',
  wasb: 'Prefer wasbs (TLS), or add wasb to gateway.artifacts.allowed-schemes.',
  abfs: 'Prefer abfss (TLS), or add abfs to gateway.artifacts.allowed-schemes.',
};

/**
 * The first gate for a jar URI: it must parse, carry no credentials of its own, and use a scheme
 * that is both allowed by the cluster and served by a plugin. (Where it may connect to is decided
 * later, at connect time, by the ConnectGuard.)
 */
export function checkUri(raw: string, allowedSchemes: readonly string[], plugins: PluginRegistry): URL {
  if (raw.length > 4096) throw new GatewayError('GW_FETCH_URI_INVALID', { uri: '<too long>', reason: 'longer than 4096 characters' });
  let uri: URL;
  try {
    uri = new URL(raw);
  } catch {
    throw new GatewayError('GW_FETCH_URI_INVALID', {
      uri: raw.replace(/[?#].*$/, '').slice(0, 200),
      reason: 'it does not parse as an absolute URI (expected e.g. s3://bucket/path/app.jar or https://host/app.jar)',
    });
  }
  const scheme = uri.protocol.replace(/:$/, '').toLowerCase();
  // wasb(s)/abfs(s) put the container where userinfo goes; anywhere else userinfo is a credential.
  if (uri.password || (uri.username && !/^(wasbs?|abfss?)$/.test(scheme))) {
    throw new GatewayError('GW_FETCH_URI_INVALID', {
      uri: redactUri(uri),
      reason: 'credentials inside the URI are not accepted; the cluster uses its own configured credentials',
    });
  }
  const enabled = plugins.schemes().filter((s) => allowedSchemes.map((a) => a.toLowerCase()).includes(s));
  if (!enabled.includes(scheme)) {
    throw new GatewayError('GW_FETCH_SCHEME_UNSUPPORTED', {
      scheme,
      uri: redactUri(uri),
      schemes: enabled.join(', ') || '(none)',
      hint:
        HINTS[scheme] ??
        (plugins.pluginFor(scheme) ? `Add ${scheme} to gateway.artifacts.allowed-schemes to allow it.` : 'No filesystem plugin serves it.'),
    });
  }
  if (uri.pathname === '' || uri.pathname === '/' || uri.pathname.endsWith('/')) {
    throw new GatewayError('GW_FETCH_URI_INVALID', { uri: redactUri(uri), reason: 'it names a directory, not a jar file' });
  }
  return uri;
}

/** The hand-off file name: last path segment, sanitised, `.jar` appended if missing. */
export function handoffName(uri: URL): string {
  let segment = uri.pathname.split('/').filter(Boolean).pop() ?? 'job';
  try {
    segment = decodeURIComponent(segment);
  } catch {
    /* keep the raw segment */
  }
  let name =
    segment
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .replace(/^\.+/, '')
      .slice(0, 200) || 'job';
  if (!name.endsWith('.jar')) name += '.jar';
  return name;
}
