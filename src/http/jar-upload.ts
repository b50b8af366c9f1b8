import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { PassThrough, type Writable } from 'node:stream';
import type { Request, Response } from 'express';
import multer from 'multer';
import type { Logger } from 'pino';
import type { ZipLimits } from '../artifacts/zip-bounds';
import type { JarHandoff } from '../cluster/jar-handoff';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import { GatewayError } from '../errors/gateway-error';
import { JarStreamStorage, jarFileName, type UploadResult } from './jar-stream-storage';
import { parseObject } from './json-body';

export type { UploadResult } from './jar-stream-storage';

/** How much of a refused upload is read before answering (see `stop`). */
const DRAIN_LIMIT = 8 * 1024 * 1024;
/** Flink's upload takes one file and an optional `request` attribute; a few more parts are refused by name. */
const MAX_FIELDS = 16;
const MAX_FIELD_SIZE = 1024 * 1024;
const REQUEST_ATTRIBUTE = "EmptyRequestBody (the upload's 'request' attribute)";

/** What multer sees of the request: headers, and the bytes the gateway lets through (see `uploadJar`). */
type Feed = PassThrough & { headers: IncomingHttpHeaders; body?: Record<string, unknown>; files?: Express.Multer.File[] };

/**
 * POST /jars/upload with Flink's rules (any file field name, an optional `request` attribute,
 * exactly one file ending in `.jar`), parsed by multer into a storage engine that buffers nothing
 * (`JarStreamStorage`) while the jar is hashed and checked (zip structure and `zipLimits`, the
 * registry's defaults unless given). The jar reaches the JobManager whole only after the whole
 * client body was read and every check passed, so a bad upload never lands there: streamed to it
 * with the multipart body completed last (ADR 0002), or, with a shared-dir hand-off, linked into
 * its jar directory (ADR 0019).
 *
 * multer reads a feed the gateway pipes the request into, not the request itself: on an error multer
 * drains its input to the end before it reports, which for an oversized body means reading all of
 * it. The gateway instead cuts the feed at the first failure and reads at most `DRAIN_LIMIT` more of
 * the request before answering; the connection then closes once the client stops sending (the
 * request context's lingering close, itself bounded).
 */
export interface UploadJarOptions {
  cluster: JobManagerClient;
  /** A shared-dir hand-off links the checked jar into the JobManager's jar directory (ADR 0019). */
  handoff?: JarHandoff;
  maxBytes: number;
  log: Logger;
  zipLimits?: ZipLimits;
  /** Where the upload is spooled (a private directory; for a linked upload, on the JobManager's volume). */
  spoolBase?: string;
  /**
   * The jar budget: called with the jar's bytes so far (the declared length first, then as they
   * arrive) and throws (429) when they do not fit; the upload then stops and nothing is kept.
   */
  charge?: (bytes: number) => void;
  /** fetched-only mode: only a placeholder this small and without classes is accepted (403 GW_POLICY_FETCHED_ONLY). */
  placeholderMaxBytes?: number;
}

/** The multipart framing a declared Content-Length may hold besides the jar. */
const MULTIPART_SLACK = 64 * 1024;

export function uploadJar(req: Request, opts: UploadJarOptions): Promise<UploadResult> {
  const { cluster, handoff, log, zipLimits, spoolBase = tmpdir(), charge, placeholderMaxBytes } = opts;
  const placeholderOnly = placeholderMaxBytes !== undefined;
  const maxBytes = placeholderOnly ? Math.min(opts.maxBytes, placeholderMaxBytes) : opts.maxBytes;
  const tooLarge = () =>
    placeholderOnly
      ? new GatewayError('GW_POLICY_FETCHED_ONLY', {
          what: `an upload larger than a placeholder jar (gateway.policy.fetched-only.max-upload-size: ${maxBytes} bytes)`,
        })
      : new GatewayError('GW_UPLOAD_TOO_LARGE', { limit: maxBytes });
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes + MULTIPART_SLACK) return Promise.reject(closing(tooLarge()));
  if (!/^multipart\/form-data\s*;/i.test(req.headers['content-type'] ?? ''))
    return Promise.reject(new GatewayError('GW_UPLOAD_NOT_MULTIPART'));
  // A declared length over the budget is refused before any of the body is read.
  if (charge && Number.isFinite(declared)) {
    try {
      charge(Math.max(0, declared - MULTIPART_SLACK));
    } catch (err) {
      return Promise.reject(closing(err as GatewayError));
    }
  }

  return new Promise<UploadResult>((resolve, reject) => {
    let settled = false;
    const feed = Object.assign(new PassThrough(), { headers: req.headers }) as Feed;

    /** The first failure wins: multer is cut off, the JobManager keeps nothing, the client gets the answer. */
    const stop = (err: GatewayError, drain = true) => {
      if (settled) return;
      settled = true;
      storage.discard(new Error(err.code));
      req.unpipe(feed);
      feed.destroy();
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

    const storage = new JarStreamStorage({
      cluster,
      ...(handoff ? { handoff } : {}),
      maxBytes,
      tooLarge,
      log,
      spoolBase,
      ...(zipLimits ? { zipLimits } : {}),
      ...(charge ? { charge } : {}),
      placeholderOnly,
      onFailure: (err) => stop(err),
    });
    const upload = multer({
      storage,
      limits: { fileSize: maxBytes, files: 1, fields: MAX_FIELDS, fieldSize: MAX_FIELD_SIZE },
      // Before the file's bytes go anywhere: its name, and the attributes sent ahead of it.
      fileFilter: (_req, file, accept) => {
        const name = jarFileName(file.originalname);
        if (!name.endsWith('.jar')) return accept(new GatewayError('GW_UPLOAD_NOT_JAR_NAME', { name }));
        try {
          checkAttributes(feed.body);
        } catch (err) {
          return accept(err as GatewayError);
        }
        accept(null, true);
      },
      // multer stops feeding busboy when it is done (with or without an error); from then on the
      // request is the gateway's to drain or not.
      streamHandler: (input: NodeJS.ReadableStream, parser: Writable) => {
        parser.once('unpipe', () => feed.destroy());
        input.pipe(parser);
      },
    } as multer.Options & { streamHandler: (input: NodeJS.ReadableStream, parser: Writable) => void }).any();

    let synchronous = true;
    upload(feed as unknown as Request, req.res as Response, (err?: unknown) => {
      // multer answers at once only when busboy refuses the headers (no boundary, say).
      if (synchronous) return stop(new GatewayError('GW_UPLOAD_NOT_MULTIPART'), false);
      if (err !== undefined) return stop(asUploadError(err, tooLarge));
      if (settled) return;
      const files = feed.files ?? [];
      if (files.length !== 1) return stop(new GatewayError('GW_UPLOAD_FILE_COUNT', { count: files.length }));
      try {
        checkAttributes(feed.body);
      } catch (e) {
        return stop(e as GatewayError);
      }
      storage.complete().then(
        (result) => {
          if (settled) return;
          settled = true;
          resolve(result);
        },
        (e: unknown) => {
          if (settled) return;
          settled = true;
          reject(e);
        },
      );
    });
    synchronous = false;
    if (settled) return;

    req.on('close', () => {
      if (!req.readableEnded) stop(new GatewayError('GW_UPLOAD_INCOMPLETE', { reason: 'the client closed the connection' }), false);
    });
    req.on('error', () => feed.destroy());
    req.pipe(feed);
  });
}

/**
 * Flink parses the `request` attribute as the upload's request body (an empty JSON object; other
 * fields are ignored), by the rule of every request body: empty is fine, anything that is not a
 * JSON object is refused. Flink answers `null` with a 500; the gateway says 400, the caller's
 * mistake. Any other attribute is refused by name.
 */
function checkAttributes(fields: Record<string, unknown> | undefined): void {
  for (const [name, value] of Object.entries(fields ?? {})) {
    if (name !== 'request') throw new GatewayError('GW_UPLOAD_UNKNOWN_ATTRIBUTE', { name });
    for (const v of Array.isArray(value) ? value : [value]) {
      if (typeof v !== 'string')
        throw new GatewayError('GW_REQUEST_MALFORMED', { type: REQUEST_ATTRIBUTE, reason: 'it must be a plain form field' });
      parseObject(v, REQUEST_ATTRIBUTE);
    }
  }
}

/** multer's and busboy's errors in the gateway's codes; the gateway's own (from the engine or the filter) as they are. */
function asUploadError(err: unknown, tooLarge: () => GatewayError): GatewayError {
  const e = err as { code?: unknown; field?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  if (code.startsWith('GW_')) return err as GatewayError;
  switch (code) {
    case 'LIMIT_FILE_SIZE':
      return tooLarge();
    case 'LIMIT_FILE_COUNT':
      return new GatewayError('GW_UPLOAD_FILE_COUNT', { count: '2 or more' });
    case 'LIMIT_FIELD_VALUE':
      if (e.field !== 'request') return new GatewayError('GW_UPLOAD_UNKNOWN_ATTRIBUTE', { name: String(e.field) });
      return new GatewayError('GW_REQUEST_MALFORMED', { type: REQUEST_ATTRIBUTE, reason: `it is longer than ${MAX_FIELD_SIZE} bytes` });
    case 'LIMIT_FIELD_COUNT':
      return new GatewayError('GW_REQUEST_MALFORMED', { type: 'multipart/form-data', reason: `more than ${MAX_FIELDS} attributes` });
    default:
      if (code.startsWith('LIMIT_') || code.endsWith('_FIELD_NAME'))
        return new GatewayError('GW_REQUEST_MALFORMED', { type: 'multipart/form-data', reason: String(e.message) });
      return new GatewayError('GW_UPLOAD_INCOMPLETE', { reason: String(e?.message ?? err) });
  }
}

function closing(err: GatewayError): GatewayError {
  err.headers = { ...err.headers, connection: 'close' };
  return err;
}
