import {
  GetObjectCommand,
  type GetObjectCommandInput,
  type S3Client,
  type ServiceInputTypes,
  type ServiceOutputTypes,
} from '@aws-sdk/client-s3';
import type { FinalizeRequestMiddleware } from '@smithy/types';

/** A signed request, ready to send as is. */
export interface SignedRequest {
  origin: string;
  /** Path and query, already encoded exactly as signed. */
  path: string;
  headers: Record<string, string>;
}

interface HttpRequestLike {
  protocol: string;
  hostname: string;
  port?: number;
  path: string;
  query?: Record<string, string | string[] | null | undefined>;
  headers: Record<string, string>;
}

const CAPTURE = 'gatewayCaptureSignedRequest';

/**
 * Builds and signs a GetObject request with the client's own middleware stack, then stops before
 * it is sent: the endpoint rules (path-style or virtual-hosted, the AWS regional host), the key's
 * encoding, `versionId` and `Range`, the credentials from the client's provider (static keys or the
 * default chain, session token included) and SigV4 with `x-amz-content-sha256: UNSIGNED-PAYLOAD`
 * are all the SDK's, as with `client.send`. Only the transfer is left to the caller.
 */
export async function signGetObject(client: S3Client, input: GetObjectCommandInput, signal: AbortSignal): Promise<SignedRequest> {
  let captured: HttpRequestLike | undefined;
  const capture: FinalizeRequestMiddleware<ServiceInputTypes, ServiceOutputTypes> = () => async (args) => {
    captured = args.request as HttpRequestLike;
    // The interrupted pipeline needs an output with $metadata (retry and logger middleware read it).
    return { response: {}, output: { $metadata: {} } as ServiceOutputTypes };
  };
  const stack = client.middlewareStack.clone();
  stack.addRelativeTo(capture, { name: CAPTURE, relation: 'after', toMiddleware: 'httpSigningMiddleware', override: true });
  const command = new GetObjectCommand(input);
  await command.resolveMiddleware(stack, client.config, { abortSignal: signal })({ input: command.input });
  if (!captured) throw new Error('the S3 client produced no request');
  const { protocol, hostname, port, path, query, headers } = captured;
  const origin = `${protocol.replace(/:?$/, ':')}//${hostname.includes(':') && !hostname.startsWith('[') ? `[${hostname}]` : hostname}${port ? `:${port}` : ''}`;
  const qs = queryString(query ?? {});
  return { origin, path: qs ? `${path}?${qs}` : path, headers: { ...headers } };
}

/** RFC 3986 encoding, as SigV4 canonicalises the query (the store decodes either way). */
function encode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function queryString(query: Record<string, string | string[] | null | undefined>): string {
  const parts: string[] = [];
  for (const key of Object.keys(query).sort()) {
    const value = query[key];
    if (value === undefined) continue;
    if (value === null) parts.push(encode(key));
    else for (const v of Array.isArray(value) ? value : [value]) parts.push(`${encode(key)}=${encode(v)}`);
  }
  return parts.join('&');
}
