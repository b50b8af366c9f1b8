import type { IncomingHttpHeaders } from 'node:http';
import { PassThrough, Transform, type TransformCallback, type Writable } from 'node:stream';
import type { Request, Response } from 'express';
import multer from 'multer';
import { GatewayError } from '../errors/gateway-error';
import { type JobGraphSummary, JobGraphUnreadableError, readJobGraph } from '../submission/job-graph/job-graph-reader';
import { passedOnBodyBytes } from '../v8-tuning';

/** Java's serialisation magic and version (0xACED 0x0005): the first bytes of a serialised job graph. */
const SERIAL_MAGIC = Buffer.from([0xac, 0xed, 0x00, 0x05]);
/** POST /v1/jobs holds one `request` attribute and one file per jar, artifact and the graph. */
const MAX_FIELD_SIZE = 1024 * 1024;

type Feed = PassThrough & { headers: IncomingHttpHeaders; body?: Record<string, unknown> };

/**
 * Passes a POST /v1/jobs body (multipart: a `request` attribute naming the files, a serialised job
 * graph, jars and artifacts) through to the JobManager unchanged, while reading the job graph on the
 * side. The last chunk is held back until `onGraph` (the registration) has settled: Flink's
 * multipart handler does not hand the request on before the body is complete, so the job cannot
 * start before it is registered. A graph that cannot be read (or a registration refused) fails the
 * body, so the JobManager never gets a complete request; `failure` holds the error for the client.
 *
 * Only file parts that start with Java's serialisation magic are kept (up to `maxGraphBytes` each,
 * `maxGraphBytes` in all); jars and artifacts pass without being held.
 */
export class JobGraphTap extends Transform {
  failure: GatewayError | undefined;
  private held: Buffer | undefined;
  private readonly feed: Feed;
  /** Once the side parse has settled (done, or failed and unpiped), the feed takes no more bytes. */
  private feedClosed = false;
  private waitingForFeed: (() => void) | undefined;
  private readonly parsed: Promise<{ fields: Record<string, unknown>; graphs: Map<string, Buffer | 'too large'> }>;

  constructor(
    headers: IncomingHttpHeaders,
    private readonly opts: { maxGraphBytes: number; onGraph: (graph: JobGraphSummary) => Promise<void> },
  ) {
    super();
    this.feed = Object.assign(new PassThrough(), { headers }) as Feed;
    const graphs = new Map<string, Buffer | 'too large'>();
    let kept = 0;
    const storage: multer.StorageEngine = {
      _handleFile: (_req, file, cb) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let graph: boolean | undefined;
        file.stream.on('data', (chunk: Buffer) => {
          if (graph === undefined)
            graph = chunk.length >= SERIAL_MAGIC.length ? chunk.subarray(0, SERIAL_MAGIC.length).equals(SERIAL_MAGIC) : false;
          if (!graph) return;
          size += chunk.length;
          kept += chunk.length;
          if (size > opts.maxGraphBytes || kept > opts.maxGraphBytes) {
            graph = false;
            chunks.length = 0;
            graphs.set(file.originalname, 'too large');
            return;
          }
          chunks.push(chunk);
        });
        file.stream.once('end', () => {
          if (graph) graphs.set(file.originalname, Buffer.concat(chunks));
          cb(null, { size });
        });
        file.stream.once('error', (err) => cb(err));
      },
      _removeFile: (_req, _file, cb) => cb(null),
    };
    this.parsed = new Promise((resolve, reject) => {
      const upload = multer({
        storage,
        limits: { fields: 16, fieldSize: MAX_FIELD_SIZE, files: 10_000 },
        streamHandler: (input: NodeJS.ReadableStream, parser: Writable) => input.pipe(parser),
      } as multer.Options & { streamHandler: (input: NodeJS.ReadableStream, parser: Writable) => void }).any();
      upload(this.feed as unknown as Request, {} as Response, (err?: unknown) => {
        if (err !== undefined) reject(err);
        else resolve({ fields: this.feed.body ?? {}, graphs });
      });
    });
    // Settled in _flush; a body that fails first must not leave an unhandled rejection behind.
    const closeFeed = () => {
      this.feedClosed = true;
      const waiting = this.waitingForFeed;
      this.waitingForFeed = undefined;
      waiting?.();
    };
    this.parsed.then(closeFeed, closeFeed);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    passedOnBodyBytes(chunk.length);
    const previous = this.held;
    this.held = chunk;
    if (this.feedClosed || this.feed.write(chunk)) {
      done(null, previous);
      return;
    }
    // Whichever comes first: the parser takes more, or it has finished and takes nothing more.
    let once = false;
    const forward = () => {
      if (once) return;
      once = true;
      this.feed.off('drain', forward);
      this.waitingForFeed = undefined;
      done(null, previous);
    };
    this.waitingForFeed = forward;
    this.feed.once('drain', forward);
  }

  override _flush(done: TransformCallback): void {
    this.feed.end();
    this.decide().then(
      () => {
        const last = this.held;
        this.held = undefined;
        done(null, last);
      },
      (err: unknown) => {
        this.failure = err as GatewayError;
        done(err as Error);
      },
    );
  }

  override _destroy(err: Error | null, cb: (error: Error | null) => void): void {
    this.feed.destroy();
    cb(err);
  }

  private async decide(): Promise<void> {
    let parsed: Awaited<typeof this.parsed>;
    try {
      parsed = await this.parsed;
    } catch (err) {
      throw unreadable(`its multipart body cannot be read (${(err as Error).message})`);
    }
    const request = parsed.fields.request;
    let body: { jobGraphFileName?: unknown; executionPlanFileName?: unknown };
    try {
      body = JSON.parse(typeof request === 'string' ? request : '') as typeof body;
    } catch {
      throw unreadable("its 'request' attribute is not the JSON body Flink's client sends");
    }
    const name = body?.executionPlanFileName ?? body?.jobGraphFileName;
    if (typeof name !== 'string') throw unreadable("its 'request' attribute names no jobGraphFileName");
    const graph = parsed.graphs.get(name);
    if (graph === undefined)
      throw unreadable(
        `the file ${JSON.stringify(name.slice(0, 200))} it names is not among its parts, or is not a Java-serialised job graph`,
      );
    if (graph === 'too large')
      throw unreadable(`the serialised job graph is larger than gateway.tokens.job-graph.max-size (${this.opts.maxGraphBytes} bytes)`);
    let summary: JobGraphSummary;
    try {
      summary = readJobGraph(graph);
    } catch (err) {
      if (err instanceof JobGraphUnreadableError) throw unreadable(err.message);
      throw err;
    }
    await this.opts.onGraph(summary);
  }
}

function unreadable(reason: string): GatewayError {
  return new GatewayError('GW_JOB_GRAPH_UNREADABLE', { reason });
}
