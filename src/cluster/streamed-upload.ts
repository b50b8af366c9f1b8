import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { slabPool } from '../download/slab-pool';

/** TLS of the gateway → JobManager hop: extra trusted CAs and a client certificate. */
export interface JobManagerTls {
  /** Trusted CAs (the system's plus the configured one); undefined = the system's only. */
  ca?: string[] | undefined;
  cert?: string;
  key?: string;
}

export interface StreamedAnswer {
  status: number;
  location?: string;
  text: string;
}

/**
 * The agent for jar uploads to the JobManager: at most 64 at once (as the JSON pool), a new
 * connection per upload. Keep-alive buys nothing for a transfer of megabytes, and a pooled
 * connection the JobManager closed meanwhile would fail an upload whose streamed body cannot be
 * sent twice.
 */
export function uploadAgent(secure: boolean, tls?: JobManagerTls): http.Agent {
  const o = { keepAlive: false, maxSockets: 64 };
  return secure ? new https.Agent({ ...o, ...tls }) : new http.Agent(o);
}

/**
 * POSTs `body` to `url` with chunked transfer coding and resolves with the answer (the status and
 * the text of its body). Through node:http rather than undici for one reason: its write callback
 * says when the socket is done with a chunk, so the chunks of the bulk client's slabs go back to
 * the slab pool here (ADR 0035) instead of waiting for the garbage collector — each 64 MiB of such
 * garbage costs a full collection and, on a loaded machine, RSS (ADR 0015). A body chunk that is
 * not a pooled slab is left alone.
 *
 * The body is read only once a connection takes the request, so an upload queued for one holds
 * no bytes. A body that fails or closes before its end destroys the request, and the JobManager,
 * which never saw the closing boundary, keeps nothing. `signal` aborts the exchange.
 */
export function streamedPost(
  agent: http.Agent,
  url: URL,
  contentType: string,
  body: Readable,
  signal?: AbortSignal,
): Promise<StreamedAnswer> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      agent,
      headers: { 'content-type': contentType },
    });
    let settled = false;
    const settle = (err: Error | undefined, answer?: StreamedAnswer) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve(answer!);
    };
    const onAbort = () => request.destroy(signal!.reason instanceof Error ? signal!.reason : new Error(String(signal!.reason)));
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (err) => settle(err));
    body.once('error', (err) => request.destroy(err));
    body.once('close', () => {
      if (!body.readableEnded) request.destroy(new Error('the upload body closed before its end'));
    });
    request.once('socket', () => {
      body.on('data', (chunk: Buffer) => {
        const more = request.write(chunk, (err) => {
          // Written out: nothing holds the chunk any more. After a failed write it is left to the
          // collector rather than trusted to be free.
          if (!err) slabPool.recycle(chunk);
        });
        if (!more) body.pause();
      });
      request.on('drain', () => body.resume());
      body.once('end', () => request.end());
    });
    request.once('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.once('error', (err) => settle(err));
      res.once('end', () => {
        const location = res.headers.location;
        settle(undefined, { status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8'), ...(location ? { location } : {}) });
        // An answer before the body's end: the exchange is over, whatever the body does next.
        if (!body.readableEnded) {
          body.pause();
          request.destroy();
        }
      });
    });
  });
}
