import { Readable } from 'node:stream';
import { Agent, type Dispatcher } from 'undici';
import { isGatewayError } from '../../src/errors/gateway-error';
import { trustedCa } from '../../src/net/guarded-connector';
import { BulkHttpError, type BulkHttpOptions, type BulkRequest, type BulkResponse } from '../../src/download/bulk-http';
import { slabPool } from '../../src/download/slab-pool';
import { slabConnector } from './slab-socket';

/** Idle keep-alive connections are kept this long (servers close theirs after 5 s). */
const IDLE_MS = 4000;

/**
 * The engine the bench compares with the bulk client (ADR 0035), kept here rather than in src/ so
 * that the gateway has one. The bulk client's contract on undici's HTTP/1.1 client (llhttp parses),
 * with a connector whose sockets read into pooled slabs (`SlabSocket`): body chunks are views of
 * those slabs, lent to the consumer as the bulk client lends its own. Errors keep the bulk
 * client's codes, so the plugins map them as before. Not held to the bulk client's strict tests:
 * it measures the cost of the other engine, not its behaviour on hostile input.
 */
export class UndiciBulkClient {
  private readonly agent: Agent;
  private closed = false;

  constructor(opts: BulkHttpOptions) {
    this.agent = new Agent({
      connect: slabConnector({ guard: opts.guard, ca: trustedCa(opts.ca), connectTimeoutMs: opts.connectTimeoutMs }),
      headersTimeout: opts.readTimeoutMs,
      bodyTimeout: opts.readTimeoutMs,
      keepAliveTimeout: IDLE_MS,
      keepAliveMaxTimeout: IDLE_MS,
      pipelining: 1,
    });
  }

  request(req: BulkRequest): Promise<BulkResponse> {
    req.signal.throwIfAborted();
    if (this.closed) return Promise.reject(new BulkHttpError('ERR_BULK_CLOSED', 'the client is closed'));
    return new Promise<BulkResponse>((resolve, reject) => {
      let controller: Dispatcher.DispatchController | undefined;
      let body: Readable | undefined;
      let settled = false;
      const onAbort = () => {
        const reason = req.signal.reason as Error;
        if (controller !== undefined) controller.abort(reason);
        else if (!settled) {
          settled = true;
          reject(reason);
        }
      };
      req.signal.addEventListener('abort', onAbort, { once: true });
      const cleanup = () => req.signal.removeEventListener('abort', onAbort);
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(c) {
          controller = c;
        },
        onResponseStart(c, statusCode, headers) {
          body = new Readable({
            highWaterMark: 2 * slabPool.bytes,
            read() {
              if (c.paused) c.resume();
            },
            destroy(err, done) {
              cleanup();
              if (!c.aborted && !ended) c.abort(err ?? new BulkHttpError('ERR_BULK_CLOSED', 'the body was not read to its end'));
              done(err);
            },
          });
          let ended = false;
          (body as Readable & { markEnded?: () => void }).markEnded = () => {
            ended = true;
          };
          settled = true;
          resolve({ statusCode, headers: headers as Record<string, string | string[]>, body });
        },
        onResponseData(c, chunk) {
          slabPool.lend(chunk);
          if (!body!.push(chunk)) c.pause();
        },
        onResponseEnd() {
          cleanup();
          (body as Readable & { markEnded?: () => void }).markEnded?.();
          body!.push(null);
        },
        onResponseError(_c, err) {
          cleanup();
          const mapped = mapError(err, req.signal);
          if (!settled) {
            settled = true;
            reject(mapped);
          } else if (body !== undefined && !body.destroyed) body.destroy(mapped);
        },
      };
      const headers: Record<string, string> = { ...req.headers };
      this.agent.dispatch({ origin: req.origin.origin, path: req.path, method: req.method, headers, reset: false }, handler);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.agent.close();
  }
}

/** undici's errors as the bulk client's codes; the guard's own errors and an abort's reason pass as they are. */
function mapError(err: Error, signal: AbortSignal): Error {
  if (signal.aborted) return signal.reason as Error;
  if (isGatewayError(err) || err instanceof BulkHttpError) return err;
  const code = (err as { code?: string }).code ?? '';
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new BulkHttpError('ERR_BULK_CONNECT_TIMEOUT', err.message, { cause: err });
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT')
    return new BulkHttpError('ERR_BULK_READ_TIMEOUT', 'no bytes from the server within the read timeout', { cause: err });
  if (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_CLOSED')
    return new BulkHttpError('ERR_BULK_CLOSED', 'the connection closed', { cause: err });
  if (code.startsWith('HPE_') || code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH' || code === 'UND_ERR_INFO')
    return new BulkHttpError('ERR_BULK_PROTOCOL', 'the server sent a malformed response', { cause: err });
  return err;
}
