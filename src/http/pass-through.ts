import type { IncomingHttpHeaders } from 'node:http';
import { pipeline, type Readable, Transform, type Writable } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import { GatewayError } from '../errors/gateway-error';
import { isJobGraphSubmission } from './authorization';
import { decodeAnswer, filterConfigurationAnswer, flinkSecretRule, type SecretRule } from './configuration-filter';
import { forwardedRequestHeaders } from './forwarded-headers';
import { answerClassesOf } from './jobmanager-answers';
import { passedOnBodyBytes } from '../v8-tuning';
import type { JobGraphSummary } from '../submission/job-graph/job-graph-reader';
import { type JobGraphHook, readJobGraphAnswer } from './job-graph-answer';
import { JobGraphTap } from './job-graph-tap';

// Hop-by-hop headers of an answer (RFC 9110 §7.6.1), not relayed to the client.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'expect',
]);

function responseHeaders(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const connectionTokens = tokensOf(headers.connection as string | undefined);
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || connectionTokens.has(name)) continue;
    out[name] = value;
  }
  return out;
}

function tokensOf(value: string | undefined): Set<string> {
  return new Set(
    (value ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
}

function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** Request bodies larger than this (or chunked) reach the JobManager through `requestBody`'s counting stage. */
const PACED_BODY_BYTES = 1024 * 1024;

/**
 * The body handed to undici. A large one (a job graph with its jars, `POST /v1/jobs`) passes
 * through a stage that reports its chunks to `passedOnBodyBytes` (ADR 0033), so that they are freed
 * as they go rather than at V8's next full collection. undici reads the request itself, and a
 * second 'data' listener would start the flow before undici is ready. `pipeline` carries a failure
 * either way: a client that goes away fails the body towards the JobManager, and undici giving up
 * on the body destroys the request. A small body goes as it is.
 */
function requestBody(req: Request): Readable {
  const declared = Number(req.headers['content-length'] ?? Number.POSITIVE_INFINITY);
  if (declared <= PACED_BODY_BYTES) return req;
  const counted = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      passedOnBodyBytes(chunk.length);
      done(null, chunk);
    },
  });
  pipeline(req, counted, () => undefined);
  return counted;
}

const BODYLESS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** The largest configuration answer the gateway reads to filter it (Flink's are tens of kB). */
const MAX_FILTERED_ANSWER = 16 * 1024 * 1024;
/** Flink's Java client sends `{}` with every GET; anything past this is not a client of Flink's. */
const MAX_IGNORED_BODY = 64 * 1024;

/**
 * Forwards every request the gateway does not own to the JobManager: any method, the raw path and
 * query unchanged, bodies streamed both ways with backpressure, status and end-to-end headers kept.
 * The Flink Web UI is served this way. Only the request headers Flink's REST reads go upstream
 * (`forwardedRequestHeaders`: never the caller's credentials). Configuration listings are read
 * whole and relayed with their secrets hidden (`secrets`, the gateway's sensitivity rule; see
 * `jobmanager-answers.ts`). With `jobGraphs`, an accepted POST /v1/jobs has its job registered
 * before the answer is relayed (docs/adr/0010).
 */
export function createPassThrough(
  cluster: JobManagerClient,
  logger: Logger,
  onResponse?: (status: number, seconds: number) => void,
  jobGraphs?: JobGraphHook,
  secrets: () => SecretRule = () => flinkSecretRule,
) {
  return async function passThrough(req: Request, res: Response, next: NextFunction): Promise<void> {
    const endJobGraph =
      jobGraphs && isJobGraphSubmission(req.method, req.originalUrl.split('?')[0] ?? '/') ? jobGraphs.beginJobGraph() : undefined;
    try {
      await relay(req, res, next, endJobGraph ? jobGraphs : undefined);
    } finally {
      endJobGraph?.();
    }
  };

  async function relay(req: Request, res: Response, next: NextFunction, jobGraph: JobGraphHook | undefined): Promise<void> {
    const abort = new AbortController();
    // If the client goes away, stop the upstream exchange too (a pass-through owns nothing).
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    // GET, HEAD and OPTIONS carry no body to the JobManager (Flink reads none): a small one is
    // discarded unread-through, a large or chunked one refused; either way the answer does not wait
    // for it, and request-context closes a connection whose body was not read to its end.
    let forwardBody = hasBody(req);
    const filtered = answerClassesOf(req.originalUrl.split('?')[0] ?? '/').has('configuration');
    const headers = forwardedRequestHeaders(req, { identity: filtered });
    if (forwardBody && BODYLESS.has(req.method)) {
      const declared = Number(req.headers['content-length'] ?? Number.POSITIVE_INFINITY);
      if (!(declared <= MAX_IGNORED_BODY)) {
        next(
          new GatewayError('GW_REQUEST_MALFORMED', {
            type: `${req.method} request`,
            reason: `a ${req.method} request carries no body (this one declares ${req.headers['transfer-encoding'] ? 'a chunked' : `a ${declared}-byte`} body)`,
          }),
        );
        return;
      }
      req.resume();
      forwardBody = false;
      delete headers['content-length'];
      delete headers['content-type'];
    }
    let upstream: Dispatcher.ResponseData;
    const t0 = performance.now();
    const log: Logger = res.locals.log ?? logger;
    // POST /v1/jobs: the job graph is read on its way and its job registered before the body completes.
    let read: JobGraphSummary | undefined;
    let answered = false;
    const tap =
      jobGraph?.graphReading && forwardBody
        ? new JobGraphTap(req.headers, {
            maxGraphBytes: jobGraph.graphReading.maxBytes,
            onGraph: async (graph) => {
              if (answered || abort.signal.aborted) throw new Error('the submission ended before its job graph was read');
              await jobGraph.jobGraphRead(graph, res.locals.principal ?? 'anonymous', log.child({ jobId: graph.jobId }));
              read = graph;
            },
          })
        : undefined;
    let body: Readable | null = null;
    if (tap) {
      pipeline(req, tap, () => undefined);
      body = tap;
    } else if (forwardBody) body = requestBody(req);
    try {
      // A JobManager that accepts the connection and never answers must not hang the client: the
      // wait for its answer's head is bounded (and a redirect to its own https address refused).
      upstream = await cluster.forward({ method: req.method, url: req.originalUrl, headers, body, signal: abort.signal });
    } catch (err) {
      answered = true;
      // The body was complete (its graph read and registered): the JobManager may have the job.
      if (read && jobGraph) await jobGraph.jobGraphFailed(read, true, log);
      if (abort.signal.aborted) return;
      next(tap?.failure ?? err);
      return;
    } finally {
      answered = true;
    }
    onResponse?.(upstream.statusCode, (performance.now() - t0) / 1000);
    if (jobGraph && upstream.statusCode >= 200 && upstream.statusCode < 300) {
      await relayJobGraphAnswer(upstream, jobGraph, res, next, read);
      return;
    }
    if (read && jobGraph) await jobGraph.jobGraphFailed(read, false, log);
    if (filtered && req.method !== 'HEAD') {
      await relayFiltered(upstream, req, res, next);
      return;
    }
    // writeHead, not res.set: Express would append a charset to the upstream content type. A 503
    // (the JobManager electing a leader) says when to retry, as the gateway's own 503s do.
    const headers503 = upstream.statusCode === 503 && upstream.headers['retry-after'] === undefined ? { 'retry-after': '5' } : {};
    res.writeHead(upstream.statusCode, { ...responseHeaders(upstream.headers), ...headers503 });
    try {
      await relayBody(upstream.body, res);
    } catch (err) {
      // Headers are gone already; all we can do is cut the connection so the client sees a
      // truncated response rather than a silently short one.
      logger.warn({ err: (err as Error).message, path: req.path }, 'pass-through response stream failed');
      res.destroy();
    }
  }

  /**
   * A configuration listing: read whole (bounded), decoded if a proxy compressed it anyway, its
   * secrets hidden, then sent with its new length. An answer that cannot be read as JSON is not
   * relayed when it claims success (502): what cannot be filtered does not pass.
   */
  async function relayFiltered(upstream: Dispatcher.ResponseData, req: Request, res: Response, next: NextFunction): Promise<void> {
    const reason = (why: string) =>
      new GatewayError('GW_CLUSTER_BAD_RESPONSE', {
        target: cluster.baseUrl,
        reason: `${why} (${req.method} ${req.path.slice(0, 200)}, a configuration listing the gateway filters)`,
      });
    let text: string;
    try {
      const bytes = await readBounded(upstream.body, MAX_FILTERED_ANSWER);
      text = decodeAnswer(bytes, upstream.headers['content-encoding'], MAX_FILTERED_ANSWER).toString('utf8');
    } catch (err) {
      next(reason((err as Error).message));
      return;
    }
    const headers = responseHeaders(upstream.headers);
    delete headers['content-encoding'];
    let body = text;
    if (text.trim() !== '') {
      try {
        const { body: filteredBody, hidden } = filterConfigurationAnswer(JSON.parse(text), secrets());
        body = JSON.stringify(filteredBody);
        if (hidden > 0)
          ((res.locals.log as Logger | undefined) ?? logger).debug({ hidden }, 'configuration values hidden from a JobManager answer');
      } catch {
        if (upstream.statusCode >= 200 && upstream.statusCode < 300) {
          next(reason('the answer is not JSON'));
          return;
        }
      }
    }
    const out = Buffer.from(body, 'utf8');
    headers['content-length'] = String(out.length);
    res.writeHead(upstream.statusCode, headers);
    res.end(out);
  }

  async function relayJobGraphAnswer(
    upstream: Dispatcher.ResponseData,
    hook: JobGraphHook,
    res: Response,
    next: NextFunction,
    read: JobGraphSummary | undefined,
  ): Promise<void> {
    let answer: Awaited<ReturnType<typeof readJobGraphAnswer>>;
    const log: Logger = res.locals.log ?? logger;
    try {
      answer = await readJobGraphAnswer(upstream);
    } catch (err) {
      if (read) await hook.jobGraphFailed(read, true, log);
      next(cluster.answerFailure(err, 'POST /v1/jobs answer'));
      return;
    }
    if (read && answer.jobId !== read.jobId) {
      // Flink runs a graph under its own id; an answer naming another is not this graph's.
      log.error({ read: read.jobId, answered: answer.jobId }, "the JobManager's answer names another job than the graph it was sent");
      await hook.jobGraphFailed(read, true, log);
      read = undefined;
    }
    if (answer.jobId) {
      try {
        await hook.jobGraphAccepted(
          answer.jobId,
          res.locals.principal ?? 'anonymous',
          res.locals.reqId ?? '',
          log.child({ jobId: answer.jobId }),
          read,
        );
      } catch (err) {
        next(err);
        return;
      }
    } else {
      if (read) await hook.jobGraphFailed(read, true, log);
      log.warn('the JobManager accepted a job graph without naming its job; the job watcher will find it');
    }
    const headers = responseHeaders(upstream.headers);
    headers['content-length'] = String(answer.body.length);
    res.writeHead(upstream.statusCode, headers);
    res.end(answer.body);
  }
}

/**
 * Streams an answer's body to the client with backpressure. Settles once the response is closed
 * (sent, or the client gone: then the body is destroyed, which ends the upstream exchange), or
 * rejects with the body's error. Written out rather than `stream.pipeline`, which on every call
 * builds an AbortController and aborts it when done (a DOMException with a stack trace) and
 * leaves per-request listeners that outlive young-generation collections: measured in the
 * pass-through bench, the largest share of the objects promoted per request, and so of the
 * scavenge pauses that set its p99. Exported for its unit test.
 */
export function relayBody(body: Readable, res: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    // Either side may be gone already (the client closed while the answer's head was awaited).
    if (res.closed || res.destroyed) {
      body.destroy();
      resolve();
      return;
    }
    if (body.destroyed) {
      reject(body.errored ?? new Error('the answer was closed before it was read'));
      return;
    }
    const onData = (chunk: Buffer) => {
      passedOnBodyBytes(chunk.length);
      if (!res.write(chunk)) body.pause();
    };
    const onDrain = () => body.resume();
    const onEnd = () => res.end();
    const done = () => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      res.off('drain', onDrain);
      res.off('close', onClose);
    };
    const onError = (err: Error) => {
      done();
      reject(err);
    };
    const onClose = () => {
      done();
      if (!body.readableEnded) body.destroy();
      resolve();
    };
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
    res.on('drain', onDrain);
    res.once('close', onClose);
  });
}

/** Reads a body whole, failing past `maxBytes` (the rest is not read). */
async function readBounded(body: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw new Error(`the answer is larger than ${maxBytes} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** The JobManager accepted a job graph: register its job, then answer (or refuse, the job cancelled). */
