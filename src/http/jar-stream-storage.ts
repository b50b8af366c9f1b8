import { basename } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import type { Request } from 'express';
import type { StorageEngine } from 'multer';
import type { Logger } from 'pino';
import { JarInspector, type JarVerdict } from '../artifacts/jar-inspector';
import type { ZipLimits } from '../artifacts/zip-bounds';
import { inspectJar } from '../artifacts/zip-verify';
import type { HandedOffJar, JarHandoff } from '../cluster/jar-handoff';
import type { JobManagerClient, JsonResponse } from '../cluster/jobmanager-client';
import { MultipartJarBody } from '../cluster/multipart-jar-body';
import { GatewayError } from '../errors/gateway-error';
import { SpoolTap } from './spool-tap';

export interface UploadResult {
  body: unknown;
  sha256: string;
  size: number;
  /** Top-level classes the jar holds (0 for the operator's placeholder `empty.jar`). */
  classes: number;
}

export interface JarStreamStorageOptions {
  cluster: JobManagerClient;
  /**
   * How the accepted jar reaches the JobManager. With a shared-dir hand-off the spooled copy is
   * hard-linked into its jar directory once every check passed, and nothing is streamed to
   * /v1/jars/upload; otherwise (or without one) the jar streams there as it arrives.
   */
  handoff?: JarHandoff;
  maxBytes: number;
  /** The refusal of a file over `maxBytes`. */
  tooLarge?: () => GatewayError;
  log: Logger;
  zipLimits?: ZipLimits;
  spoolBase: string;
  /** The jar budget, told the file's bytes so far before they go on; it throws (429) when they do not fit. */
  charge?: (bytes: number) => void;
  /** fetched-only mode: a jar with classes is refused (an upload can only be a run's placeholder there). */
  placeholderOnly?: boolean;
  /** Called once with the first failure the engine sees, however late (an early JobManager answer). */
  onFailure: (err: GatewayError) => void;
}

/** The name Flink keeps: the last path segment of the client's file name. */
export function jarFileName(originalName: string | undefined): string {
  return basename((originalName ?? '').replace(/\\/g, '/'));
}

/**
 * multer's storage engine for one `POST /jars/upload` (ADR 0002, ADR 0019). The file part is
 * checked on the way (JarInspector) and copied to a private spool file, hashed on the SHA-256
 * helper thread as it becomes durable (SpoolTap, ADR 0035), that
 * `inspectJar` reads the way Java's JarFile does (the manifest the central directory points to,
 * inflated with a bound). Nothing reaches the JobManager whole before `complete()`, which the
 * caller invokes once multer has read the whole client body and the caller's own checks (one file,
 * the `request` attribute) passed; on any failure `discard()` leaves the JobManager nothing.
 *
 * - Streamed (the upload hand-off): the bytes stream on into a new one-file multipart body towards
 *   the JobManager as they arrive; `complete()` writes its closing boundary, `discard()` destroys it.
 * - Linked (the shared-dir hand-off, ADR 0019): `complete()` hard-links the spooled copy into the
 *   JobManager's jar directory, as a fetched jar is handed off; the bytes cross no second socket.
 *
 * One instance per request: it holds that request's one upload.
 */
export class JarStreamStorage implements StorageEngine {
  private body?: MultipartJarBody;
  private upstream?: Promise<JsonResponse>;
  private spool?: SpoolTap;
  /** The shared-dir hand-off that links the spooled copy, when this upload is linked. */
  private readonly linker?: JarHandoff;
  private fileName = '';
  private verdict?: JarVerdict & { ok: true };
  private classes = 0;
  /** The file part has been read and checked: an answer from the JobManager before `complete()` is still early. */
  private completed = false;
  private failed = false;

  constructor(private readonly opts: JarStreamStorageOptions) {
    if (opts.handoff?.mode === 'shared-dir') this.linker = opts.handoff;
  }

  _handleFile(_req: Request, file: Express.Multer.File, callback: (error?: unknown, info?: Partial<Express.Multer.File>) => void): void {
    let answered = false;
    const answer = (err?: GatewayError, info?: Partial<Express.Multer.File>) => {
      if (answered) return;
      answered = true;
      callback(err, info);
    };
    const fail = (err: GatewayError) => {
      answer(err);
      this.fail(err);
    };
    const { maxBytes, zipLimits, log } = this.opts;
    this.fileName = jarFileName(file.originalname);
    // The SHA-256 is the spool's, on a helper thread (ADR 0035).
    const inspector = new JarInspector(zipLimits, { hash: false });
    const body = this.linker ? undefined : this.streamUpstream(fail);
    // busboy stops passing bytes on at the limit but goes on reading the part to its end; answer now,
    // so that the caller's bounded drain, not the rest of an oversized part, decides what is read.
    file.stream.on('limit', () => fail(this.opts.tooLarge?.() ?? new GatewayError('GW_UPLOAD_TOO_LARGE', { limit: maxBytes })));
    const spool = new SpoolTap(this.opts.spoolBase);
    this.spool = spool;
    spool.on('error', (err: Error) =>
      fail(new GatewayError('GW_UPLOAD_INCOMPLETE', { reason: `the gateway could not keep its copy of the upload (${err.message})` })),
    );
    if (this.opts.charge) {
      // Each chunk is charged to the jar budget before it goes anywhere; over budget, the upload stops.
      const meter = new BudgetMeter(this.opts.charge);
      meter.once('error', (err: Error) => fail(err as GatewayError));
      file.stream.pipe(meter).pipe(inspector).pipe(spool);
    } else file.stream.pipe(inspector).pipe(spool);
    // Linked: the spool is the only copy; what it passes on is not needed.
    if (body) body.feed(spool);
    else spool.resume();
    // 'end' of the spool: every inspected byte has been handed to the multipart body (only then may
    // the closing boundary follow them) and the copy is on disk.
    spool.once('end', () => {
      void this.check(inspector, spool).then(
        (problem) => {
          if (this.failed) return;
          if (problem === 'classes') {
            log.info({ jar: this.fileName }, 'upload refused: fetched-only mode accepts placeholder jars only');
            fail(
              new GatewayError('GW_POLICY_FETCHED_ONLY', {
                what: `uploading '${this.fileName}', a jar with classes (an upload can only be the placeholder of a run by URI here)`,
              }),
            );
            return;
          }
          if (problem) {
            log.info(
              { jar: this.fileName, size: problem.size, sha256: problem.sha256, ...(problem.limit ? { limit: problem.limit } : {}) },
              problem.limit ? 'upload refused: over a zip-structure bound' : 'upload refused: not a zip',
            );
            fail(new GatewayError('GW_UPLOAD_NOT_ZIP', { name: this.fileName, reason: problem.reason }));
            return;
          }
          answer(undefined, { size: this.verdict!.size });
        },
        (err: unknown) => {
          if (this.failed) return;
          // The cause names a private path: the log has it, the client a plain reason.
          log.warn({ err, jar: this.fileName }, 'upload refused: its copy could not be hashed');
          fail(new GatewayError('GW_UPLOAD_INCOMPLETE', { reason: 'the gateway could not hash its copy of the upload; retry' }));
        },
      );
    });
  }

  _removeFile(_req: Request, _file: Express.Multer.File, callback: (error: Error | null) => void): void {
    this.discard(new Error('the upload was refused'));
    callback(null);
  }

  /**
   * Writes the closing boundary and resolves with the JobManager's answer. Call only after multer
   * finished the client's body without an error and with this engine's one file.
   */
  async complete(): Promise<UploadResult> {
    const { cluster, log } = this.opts;
    if (!this.verdict || !this.spool) throw new GatewayError('GW_UPLOAD_FILE_COUNT', { count: 0 });
    if (this.linker) return this.link(this.linker, this.spool, this.verdict);
    if (!this.body || !this.upstream) throw new GatewayError('GW_UPLOAD_FILE_COUNT', { count: 0 });
    this.completed = true;
    this.body.complete();
    const res = await this.upstream;
    if (res.status !== 200) throw cluster.failure('upload', res);
    log.info({ jar: this.fileName, size: this.verdict.size, sha256: this.verdict.sha256 }, 'jar uploaded');
    return { body: res.body, sha256: this.verdict.sha256, size: this.verdict.size, classes: this.classes };
  }

  /** Streamed: the multipart body towards the JobManager, whose answer is watched from now on. */
  private streamUpstream(fail: (err: GatewayError) => void): MultipartJarBody {
    const { cluster } = this.opts;
    const body = new MultipartJarBody(this.fileName);
    this.body = body;
    const upstream = cluster.upload(body.stream, body.contentType);
    this.upstream = upstream;
    upstream.then(
      (res) => {
        // An answer before the body was completed is always an error from the JobManager.
        if (!this.completed) fail(res.status === 200 ? badResponse(cluster) : cluster.failure('upload', res));
      },
      (err: unknown) => fail(asGatewayError(err, cluster)),
    );
    return body;
  }

  /** Linked: the checked copy into the JobManager's jar directory, answered as Flink's upload answers. */
  private async link(linker: JarHandoff, spool: SpoolTap, verdict: JarVerdict & { ok: true }): Promise<UploadResult> {
    this.completed = true;
    let handed: HandedOffJar;
    try {
      handed = await linker.handOff(spool.path, this.fileName, 'upload');
    } finally {
      // The JobManager's name for the jar is a link of its own; the private one goes either way.
      spool.discard();
    }
    this.opts.log.info({ jar: this.fileName, size: verdict.size, sha256: verdict.sha256, handoff: 'shared-dir' }, 'jar uploaded');
    return { body: { filename: handed.filename, status: 'success' }, sha256: verdict.sha256, size: verdict.size, classes: this.classes };
  }

  /** Destroys the body towards the JobManager (so it keeps nothing) and the spooled copy. Idempotent. */
  discard(reason: Error): void {
    this.failed = true;
    this.spool?.discard();
    // Completed: the JobManager has the whole file and answers; nothing to take back.
    if (!this.completed) this.body?.abandon(reason);
    this.upstream?.catch(() => undefined);
  }

  private fail(err: GatewayError): void {
    if (this.failed) return;
    this.discard(new Error(err.code));
    this.opts.onFailure(err);
  }

  /** The streaming verdict, then the spooled copy read as Java's JarFile reads it; a problem or nothing. */
  private async check(
    inspector: JarInspector,
    spool: SpoolTap,
  ): Promise<{ reason: string; limit?: string | undefined; sha256: string; size: number } | 'classes' | undefined> {
    const sha256 = await spool.sha256();
    const verdict = inspector.verdict(sha256);
    if (!verdict.ok) {
      spool.discard();
      return verdict;
    }
    // A manifest that lies about its size is refused here as it is for fetched jars — before the
    // JobManager would inflate it.
    const inspected = await inspectJar(spool.path, this.opts.zipLimits).catch((e: unknown) => ({
      problem: { reason: (e as Error).message, limit: undefined },
      points: undefined,
    }));
    // Linked, a good copy stays until `complete()` links it (or `discard()`).
    if (!this.linker || inspected.problem !== undefined) spool.discard();
    if (inspected.problem !== undefined) return { ...inspected.problem, sha256: verdict.sha256, size: verdict.size };
    this.classes = inspected.points?.classes.size ?? 0;
    if (this.opts.placeholderOnly && this.classes > 0) {
      spool.discard();
      return 'classes';
    }
    this.verdict = verdict;
    return undefined;
  }
}

/** Passes bytes on once the jar budget took them (`charge` with the total so far); fails with the budget's refusal. */
class BudgetMeter extends Transform {
  private seen = 0;

  constructor(private readonly charge: (bytes: number) => void) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.seen += chunk.length;
    try {
      this.charge(this.seen);
    } catch (err) {
      done(err as Error);
      return;
    }
    done(null, chunk);
  }
}

function badResponse(cluster: JobManagerClient): GatewayError {
  return new GatewayError('GW_CLUSTER_BAD_RESPONSE', { target: cluster.baseUrl, reason: 'upload answered before the file was complete' });
}

function asGatewayError(err: unknown, cluster: JobManagerClient): GatewayError {
  const e = cluster.translate(err, 'upload', 0);
  return (e as { code?: string })?.code?.startsWith('GW_')
    ? (e as GatewayError)
    : new GatewayError('GW_CLUSTER_BAD_RESPONSE', { target: cluster.baseUrl, reason: String((err as Error)?.message ?? err) });
}
