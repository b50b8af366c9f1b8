import type { Readable } from 'node:stream';
import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';
import { GatewayError } from '../errors/gateway-error';
import { summariseFlinkErrors } from './flink-errors';

export interface JsonResponse {
  status: number;
  body: unknown;
  /** True when the answer was not JSON (a proxy's or load balancer's page, not Flink's handler). */
  notJson?: boolean;
}

export interface JobManagerClientOptions {
  baseUrl: string;
  requestTimeoutMs: number;
  runTimeoutMs: number;
  dispatcher?: Dispatcher;
}

/**
 * The gateway's own calls to the JobManager (jar hand-off, run, plan, delete, job lookups). It
 * always uses the versioned `/v1` paths, like Flink's Java client. Network failures become
 * GW_CLUSTER_* errors; HTTP error statuses are returned for the caller to interpret, because what
 * a Flink 500 means depends on the call.
 */
export class JobManagerClient {
  readonly baseUrl: string;
  readonly dispatcher: Dispatcher;
  private readonly origin: string;
  private readonly pathPrefix: string;

  constructor(private readonly opts: JobManagerClientOptions) {
    const url = new URL(opts.baseUrl);
    this.origin = url.origin;
    this.pathPrefix = url.pathname.replace(/\/+$/, '');
    this.baseUrl = `${this.origin}${this.pathPrefix}`;
    // keep-alive pool; the pass-through shares it so a UI page load reuses connections.
    this.dispatcher = opts.dispatcher ?? new Agent({ connections: 64, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  }

  /** Path on the JobManager for a gateway path such as `/v1/jars`. */
  target(path: string): string {
    return `${this.pathPrefix}${path}`;
  }

  async json(
    method: Dispatcher.HttpMethod,
    path: string,
    options: { body?: unknown; timeoutMs?: number; operation: string; signal?: AbortSignal } = { operation: 'request' },
  ): Promise<JsonResponse> {
    const timeoutMs = options.timeoutMs ?? this.opts.requestTimeoutMs;
    const signals = [AbortSignal.timeout(timeoutMs)];
    if (options.signal) signals.push(options.signal);
    try {
      const res = await this.dispatcher.request({
        origin: this.origin,
        path: this.target(path),
        method,
        headers: options.body !== undefined ? { 'content-type': 'application/json; charset=UTF-8' } : {},
        body: options.body !== undefined ? JSON.stringify(options.body) : null,
        signal: AbortSignal.any(signals),
      });
      const text = await res.body.text();
      return { status: res.statusCode, ...parseJson(text) };
    } catch (err) {
      throw this.translate(err, options.operation, timeoutMs);
    }
  }

  /**
   * Streams one jar to `POST /v1/jars/upload` as multipart. The caller owns `body`, which must
   * produce the complete multipart payload (see `MultipartJarBody`).
   */
  async upload(body: Readable, contentType: string, signal?: AbortSignal): Promise<JsonResponse> {
    try {
      const res = await this.dispatcher.request({
        origin: this.origin,
        path: this.target('/v1/jars/upload'),
        method: 'POST',
        headers: { 'content-type': contentType },
        body,
        ...(signal ? { signal } : {}),
      });
      const text = await res.body.text();
      return { status: res.statusCode, ...parseJson(text) };
    } catch (err) {
      throw this.translate(err, 'upload', this.opts.requestTimeoutMs);
    }
  }

  runTimeoutMs(): number {
    return this.opts.runTimeoutMs;
  }

  /** gateway.cluster.request-timeout: the bound on any call other than run/plan. */
  requestTimeoutMs(): number {
    return this.opts.requestTimeoutMs;
  }

  /** Maps transport errors to gateway errors; leaves gateway errors alone. */
  translate(err: unknown, operation: string, timeoutMs: number): unknown {
    // `code` is not always a string: the DOMException of AbortSignal.timeout() has code 23.
    const errCode = (err as { code?: unknown })?.code;
    if (typeof errCode === 'string' && errCode.startsWith('GW_')) return err;
    const e = err as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
    if (e?.name === 'TimeoutError' || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT') {
      return new GatewayError('GW_CLUSTER_TIMEOUT', { target: this.baseUrl, timeoutMs, operation }, { cause: err });
    }
    if (err instanceof undiciErrors.RequestAbortedError || e?.name === 'AbortError') return err;
    const code = e?.code ?? e?.cause?.code ?? 'unknown error';
    return new GatewayError('GW_CLUSTER_UNAVAILABLE', { target: this.baseUrl, reason: String(code) }, { cause: err });
  }

  /** Turns a non-2xx answer into a gateway error with Flink's message, for calls with no special mapping. */
  failure(operation: string, res: JsonResponse): GatewayError {
    return new GatewayError('GW_CLUSTER_ERROR', { operation, status: res.status, flinkMessage: summariseFlinkErrors(res.body) });
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }
}

function parseJson(text: string): { body: unknown; notJson?: true } {
  if (text === '') return { body: {} };
  try {
    return { body: JSON.parse(text) };
  } catch {
    return { body: { errors: [`non-JSON response: ${text.slice(0, 200)}`] }, notJson: true };
  }
}
