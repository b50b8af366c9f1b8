import type { Request } from 'express';

/**
 * The request headers a client's request keeps on its way to the JobManager: an allow-list, not a
 * deny-list. Flink's REST server reads only framing (`Content-Length`; `Transfer-Encoding` and
 * `Connection` are hop-by-hop and set by the gateway's HTTP client), `Content-Type` (JSON or a
 * multipart upload) and `If-Modified-Since` (the Web UI's static files); the others here are content
 * negotiation and the client's name, which carry nothing of the caller's identity. So `Authorization`
 * (the gateway's bearer tokens), `Cookie`, `Proxy-Authorization`, client-certificate headers a proxy
 * adds (`X-Forwarded-Client-Cert`, `X-SSL-Client-*`), `FLINK_REST_CLIENT_HEADERS` extras and every
 * header a later client invents stay at the gateway, which is where the caller authenticated: the
 * JobManager's JVM runs every team's `main()`, so nothing there may learn a caller's credential.
 */
const FORWARDED = new Set([
  'accept',
  'accept-encoding',
  'accept-language',
  'cache-control',
  'content-length',
  'content-type',
  'if-modified-since',
  'pragma',
  'user-agent',
]);

function tokensOf(value: string | undefined): Set<string> {
  return new Set(
    (value ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
}

/**
 * The headers of a passed-through request towards the JobManager: the allowed ones (not those the
 * client's `Connection` names, which are for the first hop only) and the `X-Forwarded-*` the gateway
 * sets. `identity`: ask for an uncompressed answer (the routes whose answers the gateway filters).
 */
export function forwardedRequestHeaders(req: Request, opts: { identity?: boolean } = {}): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const connectionTokens = tokensOf(req.headers.connection);
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || !FORWARDED.has(name) || connectionTokens.has(name)) continue;
    out[name] = value;
  }
  if (opts.identity) out['accept-encoding'] = 'identity';
  out['x-forwarded-for'] = [req.headers['x-forwarded-for'], req.socket.remoteAddress].filter(Boolean).join(', ');
  out['x-forwarded-proto'] = req.protocol;
  if (req.headers.host) out['x-forwarded-host'] = req.headers.host;
  return out;
}
