import { createWriteStream, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import busboy from 'busboy';
import type { Request } from 'express';
import type { Logger } from 'pino';
import { JarInspector } from '../artifacts/jar-inspector';
import type { ZipLimits } from '../artifacts/zip-bounds';
import { inspectJar } from '../artifacts/zip-verify';
import type { JobManagerClient, JsonResponse } from '../cluster/jobmanager-client';
import { MultipartJarBody } from '../cluster/multipart-jar-body';
import { GatewayError } from '../errors/gateway-error';
import { parseObject } from './json-body';

/** How much of a refused upload is read before answering (see `fail`). */
const DRAIN_LIMIT = 8 * 1024 * 1024;

export interface UploadResult {
  body: unknown;
  sha256: string;
  size: number;
  /** Top-level classes the jar holds (0 for the operator's placeholder `empty.jar`). */
  classes: number;
}

/**
 * POST /jars/upload with Flink's rules (any file field name, an optional `request` attribute,
 * exactly one file ending in `.jar`), streamed to the JobManager while it is hashed and checked
 * (zip structure and `zipLimits`, the registry's defaults unless given). The multipart body towards
 * the JobManager is completed only after the checks pass, so a bad upload never lands there.
 */
export function uploadJar(req: Request, cluster: JobManagerClient, maxBytes: number, log: Logger, zipLimits?: ZipLimits, spoolBase: string = tmpdir()): Promise<UploadResult> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes + 64 * 1024) {
    return Promise.reject(closing(new GatewayError('GW_UPLOAD_TOO_LARGE', { limit: maxBytes })));
  }
  let parser: busboy.Busboy;
  try {
    parser = busboy({ headers: req.headers, limits: { fileSize: maxBytes, files: 16, fields: 16, fieldSize: 1024 * 1024 } });
  } catch {
    return Promise.reject(new GatewayError('GW_UPLOAD_NOT_MULTIPART'));
  }

  return new Promise<UploadResult>((resolve, reject) => {
    let files = 0;
    let settled = false;
    let upstream: Promise<JsonResponse> | undefined;
    let body: MultipartJarBody | undefined;
    let inspector: JarInspector | undefined;
    let spool: SpoolTap | undefined;
    let fileName = '';
    let fileEnded = false;

    const fail = (err: GatewayError, drain = true) => {
      if (settled) return;
      settled = true;
      spool?.discard();
      body?.abandon(new Error(err.code));
      upstream?.catch(() => undefined);
      req.unpipe(parser);
      parser.removeAllListeners('file');
      // Answering while the client is still sending makes many clients (undici, the JDK) see
      // EPIPE instead of the answer. Like Flink, read the rest first — but only up to a bound, then
      // answer and close the connection.
      if (!drain || req.readableEnded) {
        reject(closing(err));
        return;
      }
      let drained = 0;
      const onData = (chunk: Buffer) => {
        drained += chunk.length;
        if (drained > DRAIN_LIMIT) {
          req.off('data', onData);
          req.pause();
          reject(closing(err));
        }
      };
      req.on('data', onData);
      req.once('end', () => reject(err));
      req.resume();
    };

    parser.on('field', (name, value: string) => {
      if (name !== 'request') fail(new GatewayError('GW_UPLOAD_UNKNOWN_ATTRIBUTE', { name }));
      // Flink parses the attribute as the upload's request body (an empty JSON object; other fields
      // are ignored), by the rule of every request body: empty is fine, anything that is not a JSON
      // object is refused. Flink answers `null` with a 500; the gateway says 400, the caller's mistake.
      else {
        try {
          parseObject(value, "EmptyRequestBody (the upload's 'request' attribute)");
        } catch (err) {
          fail(err as GatewayError);
        }
      }
    });

    parser.on('file', (_field, file, info) => {
      files += 1;
      if (files > 1 || settled) {
        file.resume();
        if (files > 1) fail(new GatewayError('GW_UPLOAD_FILE_COUNT', { count: `${files} or more` }));
        return;
      }
      // Flink keeps only the last path segment of the client's file name.
      fileName = basename((info.filename ?? '').replace(/\\/g, '/'));
      if (!fileName.endsWith('.jar')) {
        file.resume();
        fail(new GatewayError('GW_UPLOAD_NOT_JAR_NAME', { name: fileName }));
        return;
      }
      inspector = new JarInspector(zipLimits);
      body = new MultipartJarBody(fileName);
      upstream = cluster.upload(body.stream, body.contentType);
      upstream.then(
        (res) => {
          // An early answer (before we completed the body) is always an error from the JobManager.
          if (!settled && !fileEnded) fail(res.status === 200 ? badResponse(cluster) : cluster.failure('upload', res));
        },
        (err: unknown) => fail(asGatewayError(err, cluster)),
      );
      file.on('limit', () => fail(new GatewayError('GW_UPLOAD_TOO_LARGE', { limit: maxBytes })));
      file.on('end', () => {
        fileEnded = true;
      });
      spool = new SpoolTap(spoolBase);
      spool.on('error', (err: Error) => fail(new GatewayError('GW_UPLOAD_INCOMPLETE', { reason: `the gateway could not keep its copy of the upload (${err.message})` })));
      file.pipe(inspector).pipe(spool);
      body.feed(spool);
    });

    parser.on('error', (err: Error) => fail(new GatewayError('GW_UPLOAD_INCOMPLETE', { reason: err.message })));

    parser.on('close', () => {
      if (settled) return;
      if (files !== 1 || !inspector || !body || !upstream) {
        fail(new GatewayError('GW_UPLOAD_FILE_COUNT', { count: files }));
        return;
      }
      const finish = async () => {
        if (settled) return;
        const verdict = inspector!.verdict();
        // The streaming checks see what the end records and central directory declare; the copy
        // spooled alongside is read the way Java's JarFile reads it (the manifest the central
        // directory points to, inflated with a bound), so a manifest that lies about its size is
        // refused here as it is for fetched jars — before the JobManager would inflate it.
        const inspected = verdict.ok ? await inspectJar(spool!.path, zipLimits).catch((e: unknown) => ({ problem: { reason: (e as Error).message, limit: undefined }, points: undefined })) : { problem: verdict, points: undefined };
        const problem = inspected.problem;
        const classes = inspected.points?.classes.size ?? 0;
        spool!.discard();
        if (settled) return;
        if (problem !== undefined) {
          log.info({ jar: fileName, size: verdict.size, sha256: verdict.sha256, ...(problem.limit ? { limit: problem.limit } : {}) }, problem.limit ? 'upload refused: over a zip-structure bound' : 'upload refused: not a zip');
          fail(new GatewayError('GW_UPLOAD_NOT_ZIP', { name: fileName, reason: problem.reason }));
          return;
        }
        body!.complete();
        upstream!.then(
          (res) => {
            if (settled) return;
            settled = true;
            if (res.status !== 200) reject(cluster.failure('upload', res));
            else {
              log.info({ jar: fileName, size: verdict.size, sha256: verdict.sha256 }, 'jar uploaded');
              resolve({ body: res.body, sha256: verdict.sha256, size: verdict.size, classes });
            }
          },
          () => undefined, // already handled above
        );
      };
      // Wait until every inspected byte has been handed to the multipart body: only then may the
      // closing boundary be written after them.
      if (spool!.readableEnded) void finish();
      else spool!.once('end', () => void finish());
    });

    req.on('aborted', () => fail(new GatewayError('GW_UPLOAD_INCOMPLETE', { reason: 'the client closed the connection' }), false));
    req.pipe(parser);
  });
}

/**
 * Passes an upload through unchanged while writing a copy to a private temporary file (0600 in a
 * fresh 0700 directory), with backpressure from both sides. 'end' comes only once the copy is on
 * disk. `discard()` removes it.
 */
class SpoolTap extends Transform {
  readonly path: string;
  private readonly dir: string;
  private readonly out: WriteStream;

  constructor(base: string) {
    super();
    this.dir = mkdtempSync(join(base, 'gw-upload-'));
    this.path = join(this.dir, 'upload.jar');
    this.out = createWriteStream(this.path, { flags: 'wx', mode: 0o600, highWaterMark: 1024 * 1024 });
    this.out.on('error', (err) => {
      if (!this.discarded) this.destroy(err);
    });
  }

  private discarded = false;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.out.write(chunk)) done(null, chunk);
    else this.out.once('drain', () => done(null, chunk));
  }

  override _flush(done: TransformCallback): void {
    this.out.end(() => done());
  }

  discard(): void {
    this.discarded = true;
    this.out.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function closing(err: GatewayError): GatewayError {
  err.headers = { ...err.headers, connection: 'close' };
  return err;
}

function badResponse(cluster: JobManagerClient): GatewayError {
  return new GatewayError('GW_CLUSTER_BAD_RESPONSE', { target: cluster.baseUrl, reason: 'upload answered before the file was complete' });
}

function asGatewayError(err: unknown, cluster: JobManagerClient): GatewayError {
  const e = cluster.translate(err, 'upload', 0);
  return (e as { code?: string })?.code?.startsWith('GW_') ? (e as GatewayError) : new GatewayError('GW_CLUSTER_BAD_RESPONSE', { target: cluster.baseUrl, reason: String((err as Error)?.message ?? err) });
}
