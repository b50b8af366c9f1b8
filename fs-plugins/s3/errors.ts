import { fetchError, findGatewayError, specificErrorCode } from '../../src/plugin-kit';

// S3 error codes as the SDK reports them in `name`. HEAD responses have no body, so a HeadObject
// failure only has the status (name 'NotFound', 'Forbidden' or even 'Unknown'): the status decides
// first, the name only refines.
const NOT_FOUND = new Set(['NoSuchKey', 'NoSuchBucket', 'NoSuchVersion', 'NotFound']);
const DENIED = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'AccessDenied',
  'Forbidden',
  'ExpiredToken',
  'InvalidToken',
  'AllAccessDisabled',
]);
const INVALID = new Set(['InvalidBucketName', 'InvalidArgument', 'KeyTooLongError']);

interface SdkLikeError {
  name?: unknown;
  code?: unknown;
  cause?: unknown;
  $metadata?: { httpStatusCode?: number };
}

/** A short, credential-free label: "403 SignatureDoesNotMatch", "ECONNREFUSED", "TimeoutError". */
function label(status: number | undefined, name: string | undefined): string {
  const useful = name !== undefined && name !== 'Unknown' && name !== 'Error' && /^[A-Za-z0-9_.-]{1,64}$/.test(name) ? name : undefined;
  if (status === undefined) return useful ?? 'request failed';
  return useful ? `${status} ${useful}` : `${status}`;
}

/**
 * Turns whatever the AWS SDK, undici (or the socket under them) threw into a gateway error, so no SDK error
 * type escapes the plugin. Messages carry the status and the S3 error code only: never the SDK's
 * message, which may echo request details.
 */
export function translateS3Error(err: unknown, uri: URL, signal: AbortSignal): Error {
  if (signal.aborted) return abortReason(signal);
  const guard = findGatewayError(err);
  if (guard) return guard;
  const e = (typeof err === 'object' && err !== null ? err : {}) as SdkLikeError;
  const status = e.$metadata?.httpStatusCode;
  const name = typeof e.name === 'string' ? e.name : undefined;
  const code = specificErrorCode(err) ?? errnoInMessage(err);

  if (status === 404 || (status === undefined && name !== undefined && NOT_FOUND.has(name))) {
    return fetchError.notFound(uri, label(404, name === 'Unknown' ? 'NotFound' : name));
  }
  if (status === 401 || status === 403 || (status === undefined && name !== undefined && DENIED.has(name))) {
    // A HEAD has no body, so its 403 carries no code: say Forbidden rather than guess which one.
    return fetchError.denied(uri, 's3', label(status ?? 403, name === 'Unknown' ? 'Forbidden' : name));
  }
  if (name === 'StsRequestError') {
    // The bucket's credentials come from STS (an assumed role, a web identity): its messages name the
    // call, the endpoint and AWS's code, never a credential. AWS refusing is "denied"; no answer is transient.
    const stsStatus = (err as { status?: number }).status;
    const message = (err as Error).message;
    return stsStatus !== undefined && stsStatus >= 400 && stsStatus < 500
      ? fetchError.denied(uri, 's3', message)
      : fetchError.unavailable(uri, message);
  }
  if (name === 'CredentialsProviderError') {
    return fetchError.denied(uri, 's3', 'no credentials: none configured and the AWS default credential chain found none');
  }
  if (status === 412) return fetchError.changed(uri, `${label(status, name)} to If-Match: the object was replaced`);
  if (status === 416) return fetchError.invalid(uri, `the byte range is not satisfiable (${label(status, name)})`);
  if (status === 400 && name !== undefined && INVALID.has(name)) {
    return fetchError.invalid(uri, `the store rejected the request (${label(status, name)})`);
  }
  if (
    name === 'TimeoutError' ||
    code === 'ETIMEDOUT' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT' ||
    code === 'ERR_BULK_READ_TIMEOUT'
  ) {
    return fetchError.unavailable(uri, 'timed out (no data from the store within the socket timeout)');
  }
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'ERR_BULK_CONNECT_TIMEOUT')
    return fetchError.unavailable(uri, 'timed out connecting to the store');
  if (status !== undefined) return fetchError.unavailable(uri, label(status, name));
  // The bulk client's own messages name no request detail.
  if (code === 'ERR_BULK_PROTOCOL' || code === 'ERR_BULK_CLOSED') return fetchError.unavailable(uri, (err as Error).message);
  return fetchError.unavailable(uri, code !== undefined && /^[A-Z0-9_]{2,40}$/.test(code) ? code : label(undefined, name));
}

/**
 * The errno code from a message such as "connect ECONNREFUSED 127.0.0.1:9000". The SDK's retry
 * layer re-wraps errors that are not `instanceof Error` in its realm (socket errors under jest's
 * sandbox) and keeps only the message; only the code-shaped token is taken from it.
 */
function errnoInMessage(err: unknown): string | undefined {
  const message = typeof err === 'object' && err !== null ? (err as { message?: unknown }).message : undefined;
  return typeof message === 'string' ? /\b(E[A-Z]{3,20})\b/.exec(message)?.[1] : undefined;
}

/** The reason the caller aborted with; an AbortError when it gave none. */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error || (typeof reason === 'object' && reason !== null && 'name' in reason)) return reason as Error;
  return new DOMException('The operation was aborted', 'AbortError');
}
