import { fetchError, findGatewayError, specificErrorCode, type GatewayError } from '../../src/plugin-kit';

/** The gateway error for a final (non-redirect) HTTP status that is not a success. */
export function statusError(uri: URL, status: number): GatewayError {
  if (status === 404 || status === 410) return fetchError.notFound(uri, String(status));
  if (status === 401 || status === 403) return fetchError.denied(uri, 'http', String(status));
  return fetchError.unavailable(uri, `HTTP ${status}`);
}

export interface TranslateContext {
  uri: URL;
  signal: AbortSignal;
  connectTimeoutMs: number;
  readTimeoutMs: number;
}

/**
 * Translates whatever undici, the bulk client, node:net or node:tls threw into a gateway error; nothing else leaves
 * the plugin. Two things pass through unchanged: the caller's abort reason (the caller knows what
 * it meant: fetch timeout, shutdown) and gateway errors raised inside the connector (the guard's
 * `GW_FETCH_RESTRICTED_HOST`), wherever undici nested them.
 */
export function translateError(err: unknown, ctx: TranslateContext): unknown {
  if (ctx.signal.aborted) return ctx.signal.reason ?? err;
  const gateway = findGatewayError(err);
  if (gateway) return gateway;
  const code = specificErrorCode(err);
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'ERR_BULK_READ_TIMEOUT':
      return fetchError.unavailable(ctx.uri, `no data for ${ctx.readTimeoutMs} ms, gateway.artifacts.http.read-timeout`, err);
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'ERR_BULK_CONNECT_TIMEOUT':
    case 'ETIMEDOUT':
      return fetchError.unavailable(
        ctx.uri,
        `no connection within ${ctx.connectTimeoutMs} ms, gateway.artifacts.http.connect-timeout`,
        err,
      );
  }
  if (code !== undefined && isTlsCode(code)) {
    return fetchError.unavailable(ctx.uri, `TLS: ${code}; if the server uses a private CA, set gateway.artifacts.ca-bundle`, err);
  }
  // The bulk client's own messages name no request detail.
  if (code === 'ERR_BULK_PROTOCOL' || code === 'ERR_BULK_CLOSED') return fetchError.unavailable(ctx.uri, messageOf(err), err);
  const proxyStatus = code === 'UND_ERR_ABORTED' ? /Proxy response \((\d+)\)/.exec(messageOf(err))?.[1] : undefined;
  if (proxyStatus !== undefined) return fetchError.unavailable(ctx.uri, `the proxy refused the tunnel with HTTP ${proxyStatus}`, err);
  // Only the code: messages of network errors are not ours to forward.
  return fetchError.unavailable(ctx.uri, code ?? 'connection failed', err);
}

function isTlsCode(code: string): boolean {
  return /CERT|SELF_SIGNED|UNABLE_TO_|ERR_SSL_|ERR_TLS_|_SIGNATURE|HOSTNAME_MISMATCH/.test(code);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : '';
}
