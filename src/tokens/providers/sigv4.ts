import { createHash, createHmac } from 'node:crypto';

/** A request to sign. `headers` must hold every header that will be sent and signed (lower-case names). */
export interface SigV4Request {
  method: string;
  /** Absolute URL; its host, path and query are signed. */
  url: URL;
  headers: Record<string, string>;
  body: string;
}

export interface SigV4Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/**
 * AWS Signature Version 4 (header form), for the few AWS query-API calls the gateway makes itself
 * (STS). Written on `node:crypto` rather than importing `@smithy/signature-v4`, which is only a
 * transitive dependency of `@aws-sdk/client-s3`; once `@aws-sdk/client-sts` is a dependency this
 * module can go. Checked against AWS's published example and against moto's verifier.
 *
 * Returns the headers to send: the input headers plus `host`, `x-amz-date`,
 * `x-amz-security-token` (with a session token) and `authorization`.
 */
export function signV4(
  req: SigV4Request,
  creds: SigV4Credentials,
  scope: { region: string; service: string },
  now: Date,
): Record<string, string> {
  const amzDate = now.toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) headers[k.toLowerCase()] = v;
  headers['host'] = req.url.host;
  headers['x-amz-date'] = amzDate;
  if (creds.sessionToken !== undefined) headers['x-amz-security-token'] = creds.sessionToken;

  const names = Object.keys(headers).sort();
  const canonicalHeaders = names.map((n) => `${n}:${headers[n]!.trim().replace(/\s+/g, ' ')}\n`).join('');
  const signedHeaders = names.join(';');
  const canonicalRequest = [
    req.method.toUpperCase(),
    canonicalPath(req.url.pathname),
    canonicalQuery(req.url.searchParams),
    canonicalHeaders,
    signedHeaders,
    sha256Hex(req.body),
  ].join('\n');
  const credentialScope = `${day}/${scope.region}/${scope.service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, credentialScope, sha256Hex(canonicalRequest)].join('\n');
  let key: Buffer = hmac(`AWS4${creds.secretAccessKey}`, day);
  key = hmac(key, scope.region);
  key = hmac(key, scope.service);
  key = hmac(key, 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign, 'utf8').digest('hex');
  headers['authorization'] =
    `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${credentialScope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return headers;
}

/** RFC 3986 unreserved characters stay; everything else is %XX with upper-case hex (AWS's rule). */
export function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function canonicalPath(pathname: string): string {
  // Non-S3 services: each segment is encoded once more on top of the URL's own encoding.
  return pathname === '' ? '/' : pathname.split('/').map((seg) => uriEncode(decodeURIComponent(seg))).join('/');
}

function canonicalQuery(params: URLSearchParams): string {
  return [...params]
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}
