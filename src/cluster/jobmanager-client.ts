import { readFileSync } from 'node:fs';
import type { Agent as HttpAgent } from 'node:http';
import type { Readable } from 'node:stream';
import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';
import { trustedCa } from '../net/guarded-connector';
import { GatewayError } from '../errors/gateway-error';
import { isWebSubmitDisabled, summariseFlinkErrors, withFlinkErrors } from './flink-errors';
import { type JobManagerTls, streamedPost, uploadAgent } from './streamed-upload';

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
  /** The pool for client traffic the gateway passes through; default: one like `dispatcher`'s. */
  passThroughDispatcher?: Dispatcher;
  /** TLS towards an https JobManager: the connect options of the default pools, and the uploads' agent. */
  tls?: JobManagerTls;
  /**
   * The JobManager's `web.access-control-allow-origin` as the gateway's copy of its configuration
   * says (gateway.cluster.flink-conf): what the gateway's own answers carry until the JobManager's
   * answers say otherwise.
   */
  allowOrigin?: string;
}

/**
 * The gateway's own calls to the JobManager (jar hand-off, run, plan, delete, job lookups). It
 * always uses the versioned `/v1` paths, like Flink's Java client. Network failures become
 * GW_CLUSTER_* errors; HTTP error statuses are returned for the caller to interpret, because what
 * a Flink 500 means depends on the call.
 */
export class JobManagerClient {
  readonly baseUrl: string;
  /** The gateway's own calls (runs, hand-offs, readiness, the job watcher). */
  readonly dispatcher: Dispatcher;
  /**
   * Client traffic passed through (the Web UI, Flink's CLI): a pool of its own, so that however
   * many clients hold pass-through connections, the gateway's own calls and readiness still get one.
   */
  private readonly passThroughDispatcher: Dispatcher;
  /** Jar uploads (`streamedPost`: the write callbacks give slab chunks back to their pool). */
  private readonly uploads: HttpAgent;
  private readonly origin: string;
  private readonly pathPrefix: string;
  /** `Access-Control-Allow-Origin` of the JobManager's latest answer that had one. */
  private learntAllowOrigin: string | undefined;

  constructor(private readonly opts: JobManagerClientOptions) {
    const url = new URL(opts.baseUrl);
    this.origin = url.origin;
    this.pathPrefix = url.pathname.replace(/\/+$/, '');
    this.baseUrl = `${this.origin}${this.pathPrefix}`;
    this.dispatcher = opts.dispatcher ?? JobManagerClient.pool(opts.tls);
    this.passThroughDispatcher = opts.passThroughDispatcher ?? JobManagerClient.pool(opts.tls);
    this.uploads = uploadAgent(url.protocol === 'https:', opts.tls);
  }

  /** A keep-alive connection pool to the JobManager (`connect`: TLS options when its REST speaks TLS). */
  private static pool(connect?: Agent.Options['connect']): Agent {
    return new Agent({ connections: 64, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0, ...(connect ? { connect } : {}) });
  }

  /** Path on the JobManager for a gateway path such as `/v1/jars`. */
  private target(path: string): string {
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
      const misconfigured = this.tlsRedirect(res.statusCode, res.headers.location);
      if (misconfigured) throw misconfigured;
      this.learnAllowOrigin(res.headers);
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
      const res = await streamedPost(this.uploads, new URL(this.target('/v1/jars/upload'), this.origin), contentType, body, signal);
      const misconfigured = this.tlsRedirect(res.status, res.location);
      if (misconfigured) throw misconfigured;
      return { status: res.status, ...parseJson(res.text) };
    } catch (err) {
      throw this.translate(err, 'upload', this.opts.requestTimeoutMs);
    }
  }

  /**
   * A client's request passed through, on the pass-through pool, answered as the JobManager answers
   * it — except a redirect to its own https address, which is the gateway's misconfiguration
   * (`tlsRedirect`). Only the wait for the response head is bounded (undici refreshes it while a
   * request body is still being sent); a long response body streams for as long as it takes.
   * Failures come back as gateway errors; an exchange aborted by `signal` rejects with the abort.
   */
  async forward(req: {
    method: string;
    url: string;
    headers: Record<string, string | string[]>;
    body: Readable | null;
    signal: AbortSignal;
  }): Promise<Dispatcher.ResponseData> {
    let res: Dispatcher.ResponseData;
    try {
      res = await this.passThroughDispatcher.request({
        origin: this.origin,
        path: this.target(req.url),
        method: req.method as Dispatcher.HttpMethod,
        headers: req.headers,
        body: req.body,
        signal: req.signal,
        headersTimeout: this.opts.requestTimeoutMs,
      });
    } catch (err) {
      throw this.translate(err, `${req.method} pass-through`, this.opts.requestTimeoutMs);
    }
    const misconfigured = this.tlsRedirect(res.statusCode, res.headers.location);
    if (misconfigured) {
      res.body.resume();
      throw misconfigured;
    }
    this.learnAllowOrigin(res.headers);
    return res;
  }

  /**
   * The `Access-Control-Allow-Origin` the gateway's own answers carry: as the JobManager sets it on
   * its answers (its `web.access-control-allow-origin`), else as its configuration says, else
   * Flink's default `*`.
   */
  allowOrigin(): string {
    return this.learntAllowOrigin ?? this.opts.allowOrigin ?? '*';
  }

  private learnAllowOrigin(headers: Record<string, string | string[] | undefined>): void {
    const value = headers['access-control-allow-origin'];
    if (typeof value === 'string') this.learntAllowOrigin = value;
  }

  /** A failure while reading a passed-through answer, as a gateway error. */
  answerFailure(err: unknown, operation: string): unknown {
    return this.translate(err, operation, this.opts.requestTimeoutMs);
  }

  runTimeoutMs(): number {
    return this.opts.runTimeoutMs;
  }

  /** gateway.cluster.request-timeout: the bound on any call other than run/plan. */
  requestTimeoutMs(): number {
    return this.opts.requestTimeoutMs;
  }

  /**
   * Flink's REST endpoint with SSL answers plain HTTP with a redirect to https on its own address
   * (RedirectingSslHandler). That is the gateway's misconfiguration (gateway.cluster.rest-url says
   * http://), never something to forward: the client cannot and must not reach that address.
   */
  private tlsRedirect(status: number, location: string | string[] | undefined): GatewayError | undefined {
    if (status < 300 || status > 399 || typeof location !== 'string' || !this.baseUrl.startsWith('http:')) return undefined;
    let target: URL;
    try {
      target = new URL(location, this.baseUrl);
    } catch {
      return undefined;
    }
    if (target.protocol !== 'https:' || target.port !== new URL(this.baseUrl).port) return undefined;
    return new GatewayError('GW_CLUSTER_TLS', {
      target: this.baseUrl,
      reason: `HTTP ${status} to ${target.origin}`,
      hint: 'the JobManager has security.ssl.rest.enabled: true, so gateway.cluster.rest-url must use https:// (with gateway.cluster.ca, and gateway.cluster.cert/key if it requires client certificates)',
    });
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
    const code = String(e?.code ?? e?.cause?.code ?? 'unknown error');
    const tlsHint = tlsProblem(code);
    if (tlsHint) return new GatewayError('GW_CLUSTER_TLS', { target: this.baseUrl, reason: code, hint: tlsHint }, { cause: err });
    return new GatewayError('GW_CLUSTER_UNAVAILABLE', { target: this.baseUrl, reason: code }, { cause: err });
  }

  /** Turns a non-2xx answer into a gateway error with Flink's message, for calls with no special mapping. */
  failure(operation: string, res: JsonResponse): GatewayError {
    if (isWebSubmitDisabled(res.status, res.body))
      return withFlinkErrors(new GatewayError('GW_CLUSTER_SUBMIT_DISABLED', { operation }), res);
    // A JobManager electing a leader (or starting, or a proxy before it) says "not now" with 503:
    // answered as 503 with Retry-After, which Flink's RestClusterClient retries; a 502 it would not.
    if (res.status === 503)
      return withFlinkErrors(
        new GatewayError('GW_CLUSTER_NOT_READY', { operation, flinkMessage: summariseFlinkErrors(res.body) || 'no message' }),
        res,
      );
    return withFlinkErrors(
      new GatewayError('GW_CLUSTER_ERROR', { operation, status: res.status, flinkMessage: summariseFlinkErrors(res.body) }),
      res,
    );
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
    this.uploads.destroy();
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

const UNTRUSTED = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
]);

/**
 * A TLS failure between the gateway and the JobManager is a configuration problem, not a restart:
 * says which side to fix. Undefined for anything that is not TLS.
 */
function tlsProblem(code: string): string | undefined {
  if (UNTRUSTED.has(code))
    return "the gateway does not trust the JobManager's REST certificate: set gateway.cluster.ca to the CA that issued it (the one in Flink's security.ssl.rest.truststore)";
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return "the JobManager's REST certificate does not name the host of gateway.cluster.rest-url: use a host it names, or reissue it";
  if (/ALERT_(BAD_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_UNKNOWN|UNKNOWN_CA|HANDSHAKE_FAILURE)/.test(code)) {
    return 'the JobManager refused the TLS handshake, usually because it requires a client certificate (security.ssl.rest.authentication-enabled): set gateway.cluster.cert and gateway.cluster.key to one that its security.ssl.rest.truststore trusts';
  }
  if (code.startsWith('ERR_SSL_') || code === 'EPROTO')
    return 'use https:// in gateway.cluster.rest-url exactly when the JobManager has security.ssl.rest.enabled: true';
  return undefined;
}

/**
 * The client's options for the JobManager at `baseUrl`, as configured: its timeouts, and TLS on the
 * gateway → JobManager hop when the JobManager's REST speaks it — extra trusted CAs
 * (`gateway.cluster.ca`, on top of the system's) and a client certificate for a JobManager that
 * requires one (the options registry checked that the files load).
 */
export function jobManagerClientOptions(config: Configuration, baseUrl: string): JobManagerClientOptions {
  const ca = config.getOptional(coreOptions.clusterCa);
  const cert = config.getOptional(coreOptions.clusterCert);
  const key = config.getOptional(coreOptions.clusterKey);
  const tls =
    ca || (cert && key)
      ? {
          ...(ca ? { ca: trustedCa(readFileSync(ca, 'utf8')) } : {}),
          ...(cert && key ? { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') } : {}),
        }
      : undefined;
  return {
    baseUrl,
    requestTimeoutMs: config.get(coreOptions.clusterRequestTimeout),
    runTimeoutMs: config.get(coreOptions.clusterRunTimeout),
    ...(tls ? { tls } : {}),
    ...(config.cluster['web.access-control-allow-origin'] !== undefined
      ? { allowOrigin: config.cluster['web.access-control-allow-origin'] }
      : {}),
  };
}
