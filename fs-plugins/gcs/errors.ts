import { errorChain, fetchError, findGatewayError, GatewayError, specificErrorCode } from '../../src/plugin-kit';

/** The caller's abort reason; an AbortError when it gave none. */
export function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (typeof reason === 'object' && reason !== null && 'name' in reason) return reason as Error;
  return new DOMException('The operation was aborted', 'AbortError');
}

/** Cloud Storage's JSON error body: `{"error":{"code":404,"errors":[{"reason":"notFound"}]}}`; the reason only. */
export function errorReason(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: { errors?: { reason?: unknown }[]; status?: unknown } };
    const reason = parsed.error?.errors?.[0]?.reason ?? parsed.error?.status;
    return typeof reason === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(reason) ? reason : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A Cloud Storage answer that is not the object, as a gateway error. The detail is the status and
 * the store's reason only (`403 forbidden`), never a header or a token. With a pin, a missing
 * object or a failed precondition means the object was replaced or deleted since it was stat'ed.
 */
export function translateStatus(uri: URL, status: number, reason: string | undefined, pinned: boolean): GatewayError {
  const detail = reason !== undefined ? `${status} ${reason}` : `${status}`;
  if (status === 412 || (pinned && status === 404))
    return fetchError.changed(uri, `${detail}: the object's generation is no longer the one pinned`);
  if (status === 404) return fetchError.notFound(uri, detail);
  if (status === 401 || status === 403) return fetchError.denied(uri, 'gcs', detail);
  if (status === 416) return fetchError.invalid(uri, `the byte range is not satisfiable (${detail})`);
  if (status === 400) return fetchError.invalid(uri, `Cloud Storage refused the request (${detail})`);
  return fetchError.unavailable(uri, detail);
}

/** The parts of a gaxios / google-auth-library error this edge looks at (never its message, which may quote a request). */
interface AuthErrorShape {
  status?: unknown;
  code?: unknown;
  response?: { status?: unknown; data?: unknown };
  message?: unknown;
}

/**
 * A failure to obtain a token (the key file, the token endpoint, ADC, the metadata server) as a
 * gateway error: refused → GW_FETCH_DENIED with the OAuth error code (`invalid_grant`), never the
 * assertion or a token; no answer → GW_FETCH_UNAVAILABLE; the guard's refusal unchanged.
 */
export function translateAuthError(err: unknown, uri: URL, signal: AbortSignal): Error {
  if (signal.aborted) return abortReason(signal);
  const direct = findGatewayError(err);
  if (direct) return direct;
  for (const e of errorChain(err)) {
    if ((e as { code?: unknown }).code === 'GW_FETCH_RESTRICTED_HOST') {
      return new GatewayError('GW_FETCH_RESTRICTED_HOST', {
        uri: '<token endpoint>',
        address: 'a restricted address',
        hostPort: 'the token endpoint',
      });
    }
  }
  const e = (typeof err === 'object' && err !== null ? err : {}) as AuthErrorShape;
  if (e.code === 'GCS_AUTH_CONFLICT') return fetchError.denied(uri, 'gcs', String(e.message));
  const message = typeof e.message === 'string' ? e.message : '';
  if (/Could not load the default credentials/i.test(message)) {
    return fetchError.denied(
      uri,
      'gcs',
      'no Google credentials: none configured (fs.gs.auth.service.account.json.keyfile) and Application Default Credentials found none (GOOGLE_APPLICATION_CREDENTIALS, the metadata server / GKE Workload Identity)',
    );
  }
  if (e.code === 'ENOENT' || e.code === 'EACCES' || /credentials file|is not JSON|no client_email/.test(message))
    return fetchError.denied(uri, 'gcs', `the GCS credentials file cannot be used: ${message}`);
  const status = typeof e.status === 'number' ? e.status : typeof e.response?.status === 'number' ? e.response.status : undefined;
  const data = e.response?.data as { error?: unknown } | undefined;
  const oauth = typeof data?.error === 'string' && /^[a-z_]{1,40}$/.test(data.error) ? data.error : undefined;
  if (status !== undefined && status >= 400 && status < 500) {
    return fetchError.denied(uri, 'gcs', `the token endpoint refused the credential (${status}${oauth ? ` ${oauth}` : ''})`);
  }
  const code = specificErrorCode(err);
  const what = status !== undefined ? `${status}` : code !== undefined && /^[A-Z0-9_]{2,40}$/.test(code) ? code : 'no answer';
  return fetchError.unavailable(uri, `no token from the Google token endpoint (${what})`);
}

/** A transport failure (connect, reset, timeout) of a storage request, as GW_FETCH_UNAVAILABLE or the guard's refusal. */
export function translateTransportError(err: unknown, uri: URL, signal: AbortSignal): Error {
  if (signal.aborted) return abortReason(signal);
  const direct = findGatewayError(err);
  if (direct) return direct;
  const code = specificErrorCode(err);
  if (code === 'ERR_BULK_READ_TIMEOUT')
    return fetchError.unavailable(uri, 'timed out (no data from Cloud Storage within the read timeout)');
  if (code === 'ERR_BULK_CONNECT_TIMEOUT') return fetchError.unavailable(uri, 'timed out connecting to Cloud Storage');
  if (code === 'ERR_BULK_PROTOCOL' || code === 'ERR_BULK_CLOSED') return fetchError.unavailable(uri, (err as Error).message);
  return fetchError.unavailable(uri, code !== undefined && /^[A-Z0-9_]{2,40}$/.test(code) ? code : 'request failed');
}
