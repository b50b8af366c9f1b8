import type { HttpHeaders, HttpOperationResponse, IHttpClient, WebResource } from '@azure/storage-blob';
import { type BulkHttpClient, discardBody } from '../../src/plugin-kit';

/** Error bodies (XML with the store's code) are read up to this size. */
const MAX_TEXT_BODY = 1024 * 1024;

/**
 * The Azure SDK's transport, replaced by the plugin kit's bulk client (ADR 0035): the SDK still
 * builds, signs (shared key, SAS, identity token), retries and parses every request; only the bytes
 * go through the bulk client, which reads a download into 1 MiB buffers instead of node:http's
 * 64 KiB reads, for far less CPU per byte. The plugin only reads, so a request with a body
 * is refused. Every connection passes the restricted-host guard inside the bulk client.
 */
export function bulkTransport(bulk: BulkHttpClient): IHttpClient {
  return {
    async sendRequest(req: WebResource): Promise<HttpOperationResponse> {
      const method = req.method.toUpperCase();
      if ((method !== 'GET' && method !== 'HEAD') || (req.body !== undefined && req.body !== null)) {
        throw new Error(`the Azure plugin only reads blobs (a ${method} request with ${req.body ? 'a' : 'no'} body was made)`);
      }
      const url = new URL(req.url);
      const abort = toAbortSignal(req.abortSignal);
      let streamed = false;
      try {
        const res = await bulk.request({
          origin: new URL(url.origin),
          path: `${url.pathname}${url.search}`,
          method,
          headers: req.headers.rawHeaders(),
          signal: abort.signal,
        });
        const headers = flatHeaders(res.headers);
        const out: HttpOperationResponse = { request: req, status: res.statusCode, headers: headersLike(headers) };
        if (method === 'HEAD') await discardBody(res.body);
        else if (req.streamResponseStatusCodes?.has(res.statusCode)) {
          // The SDK's signal still aborts the body until it is read or dropped.
          out.readableStreamBody = res.body;
          res.body.once('close', abort.done);
          streamed = true;
        } else out.bodyAsText = await readText(res.body);
        return out;
      } finally {
        if (!streamed) abort.done();
      }
    },
  };
}

function flatHeaders(headers: Record<string, string | string[]>): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) flat[name] = Array.isArray(value) ? value.join(', ') : value;
  return flat;
}

/** The part of the SDK's v1 header collection its adapter reads (`toJson`), plus the getters. */
function headersLike(flat: Record<string, string>): HttpHeaders {
  const like = {
    get: (name: string) => flat[name.toLowerCase()],
    contains: (name: string) => name.toLowerCase() in flat,
    rawHeaders: () => ({ ...flat }),
    toJson: () => ({ ...flat }),
    headersArray: () => Object.entries(flat).map(([name, value]) => ({ name, value })),
    headerNames: () => Object.keys(flat),
    headerValues: () => Object.values(flat),
    set: (name: string, value: string | number) => {
      flat[name.toLowerCase()] = String(value);
    },
    remove: (name: string) => delete flat[name.toLowerCase()],
    clone: () => headersLike({ ...flat }),
  };
  return like as unknown as HttpHeaders;
}

async function readText(body: NodeJS.ReadableStream & AsyncIterable<unknown>): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of body) {
    const b = chunk as Buffer;
    n += b.length;
    if (n > MAX_TEXT_BODY) break; // leaving the loop destroys the body
    chunks.push(b);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The SDK hands an AbortSignalLike (or none); the bulk client takes an AbortSignal. `done` removes
 * the listener a foreign signal got, so one long-lived SDK signal does not collect a listener per
 * request.
 */
function toAbortSignal(like: WebResource['abortSignal']): { signal: AbortSignal; done: () => void } {
  const none = () => undefined;
  if (like === undefined) return { signal: new AbortController().signal, done: none };
  if (like instanceof AbortSignal) return { signal: like, done: none };
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  if (like.aborted) {
    controller.abort();
    return { signal: controller.signal, done: none };
  }
  like.addEventListener('abort', onAbort);
  return { signal: controller.signal, done: () => like.removeEventListener('abort', onAbort) };
}
