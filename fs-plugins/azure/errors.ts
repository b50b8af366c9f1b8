import { GatewayError, fetchError, findGatewayError } from '../../src/plugin-kit';

/** The parts of a RestError (or a Node/identity error) this edge looks at. */
interface SdkErrorShape {
  name?: string;
  message?: string;
  code?: string;
  statusCode?: number;
  cause?: unknown;
  request?: { url?: string };
}

const NOT_FOUND_CODES = new Set(['BlobNotFound', 'ContainerNotFound', 'ResourceNotFound']);
// @azure/identity's failures when no identity is available or the token request is refused.
const IDENTITY_ERRORS = /^(CredentialUnavailableError|AuthenticationRequiredError|AuthenticationError|AggregateAuthenticationError)$/;

function shape(err: unknown): SdkErrorShape {
  return typeof err === 'object' && err !== null ? (err as SdkErrorShape) : {};
}

/** Removes SAS signatures and keys from text that may quote a URL or a header. */
export function scrub(text: string): string {
  return text
    .replace(/([?&](?:sig|se|sv|sp|st|spr|srt|ss|sr|skoid|sktid|skt|ske|sks|skv)=)[^&\s'"]*/gi, '$1REDACTED')
    .replace(/(SharedKey(?:Lite)? [^:\s]+:)[^\s'"]+/g, '$1REDACTED')
    .replace(/(AccountKey=)[^;\s'"]+/gi, '$1REDACTED');
}

/** A credential-free stand-in for an SDK error, kept as `cause` for the log. */
function safeCause(err: unknown): Error {
  const e = shape(err);
  const out = new Error(scrub(`${e.name ?? 'Error'}: ${e.message ?? ''}`.trim()));
  Object.assign(out, { code: e.code, statusCode: e.statusCode });
  return out;
}

/** A guard refusal the SDK re-wrapped (only its code and the request URL are left). */
function guardRefusal(err: SdkErrorShape): GatewayError {
  try {
    const u = new URL(err.request?.url ?? '');
    const port = Number(u.port || (u.protocol === 'https:' ? 443 : 80));
    return new GatewayError('GW_FETCH_RESTRICTED_HOST', {
      uri: `${u.hostname}:${port}`,
      address: 'a restricted address',
      hostPort: `${u.hostname}:${port}`,
    });
  } catch {
    return new GatewayError('GW_FETCH_RESTRICTED_HOST', { uri: '<unknown>', address: 'a restricted address', hostPort: '<host>:<port>' });
  }
}

/**
 * Translates whatever the Azure SDK threw into a gateway error (or the caller's abort reason).
 * `RestError.message` is empty for failed downloads, so this branches on `statusCode` and `code`;
 * messages carry only a status and the store's error code, never a key or a SAS signature.
 */
export function translateAzureError(err: unknown, uri: URL, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason ?? err;
  const direct = findGatewayError(err);
  if (direct) return direct;
  const e = shape(err);
  if (e.code === 'GW_FETCH_RESTRICTED_HOST') return guardRefusal(e);
  // The identity's token request failed (before storage saw anything): say so, with Entra's own
  // AADSTS code when it gave one (a code, never the request or a secret).
  if (e.name !== undefined && IDENTITY_ERRORS.test(e.name)) {
    const aad = /\bAADSTS\d{4,8}\b/.exec(String((err as { message?: unknown }).message ?? ''))?.[0];
    return fetchError.denied(
      uri,
      'azure',
      `no usable Azure identity (${e.name}${aad ? ` ${aad}` : ''}); check the fs.azure.account.oauth* settings, or configure an account key or SAS, or give the gateway a managed/workload identity with Storage Blob Data Reader`,
    );
  }
  const status = typeof e.statusCode === 'number' ? e.statusCode : undefined;
  const detail = [status, e.code].filter((x) => x !== undefined && x !== '').join(' ');
  if (status === 404 || (status === undefined && e.code !== undefined && NOT_FOUND_CODES.has(e.code))) {
    return fetchError.notFound(uri, detail || '404 NotFound');
  }
  if (status === 401 || status === 403) return fetchError.denied(uri, 'azure', detail);
  if (status === 412) return fetchError.changed(uri, `${detail} to If-Match: the blob was replaced`);
  if (e.name === 'AbortError') return fetchError.unavailable(uri, 'the request was aborted by the Azure SDK', safeCause(err));
  return fetchError.unavailable(uri, detail || e.name || 'unknown error', safeCause(err));
}

/**
 * For errors raised while a download stream is flowing: the caller's abort reason, a guard refusal
 * (a resumed range request reconnects), or GW_FETCH_UNAVAILABLE. The SDK reports a dropped
 * connection as an AbortError of its own, which is not the caller's abort.
 */
export function translateStreamError(err: unknown, uri: URL, signal: AbortSignal): Error {
  if (signal.aborted) return signal.reason instanceof Error ? signal.reason : new Error('aborted');
  const direct = findGatewayError(err);
  if (direct) return direct;
  const e = shape(err);
  if (e.code === 'GW_FETCH_RESTRICTED_HOST') return guardRefusal(e);
  if (typeof e.statusCode === 'number') {
    const out = translateAzureError(err, uri, signal);
    if (out instanceof Error) return out;
  }
  const what = [e.name, e.code].filter((x) => x !== undefined && x !== '').join(' ');
  return fetchError.unavailable(uri, `the download broke off mid-stream${what ? ` (${what})` : ''}`, safeCause(err));
}
