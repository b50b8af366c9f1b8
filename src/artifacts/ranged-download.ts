import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { GatewayError } from '../errors/gateway-error';
import { fetchError } from './fetch-error';
import type { FileSystem, ObjectStat, OpenOptions } from './fs-plugin';
import { ObjectFile, type Part } from './object-file';
import type { DownloadResult } from './download';
import { redactUri } from './uri';

/** `gateway.artifacts.parallel-fetch.*`. */
export interface ParallelSettings {
  /** Bytes per ranged request. */
  partSize: number;
  /** Ranged requests in flight at once; 1 = one stream. */
  concurrency: number;
}

/** A stat that allows a pinned ranged read (see `rangedEligible`). */
export type RangedStat = ObjectStat & { size: number };

/** Gathered bytes per positional writev of one part (memory: concurrency × this, plus the sockets'). */
const PART_WRITE_BUFFER = 256 * 1024;

/** The last round's parts are this many times smaller than the others (see `planParts`). */
const LAST_ROUND_TAPER = 4;

/** One ranged request: bytes [start, end) of the object. */
export interface PartRange {
  start: number;
  end: number;
}

/**
 * How an object is cut into ranged requests, in the order they are issued.
 *
 * - Whole rounds: the number of parts is a multiple of the concurrency, so that the last round of
 *   requests is as full as the others (25 parts of 8 MiB on 8 requests leave 7 idle for the whole
 *   last round; 32 parts of 6.25 MiB do not). `partSize` is an upper bound.
 * - A short last round: the digest takes bytes in order, so while a round is read it can only
 *   follow its lowest part; the other parts of the last round are hashed after the last byte
 *   arrived, so that tail grows with the round's size. An object of at least half a round of full
 *   parts therefore ends with a round of parts `LAST_ROUND_TAPER` times smaller, and the rounds
 *   before it share the rest (for a smaller object the extra request would cost more than the
 *   tail). Measured on the bench link (8 × 16 MiB/s, 10 ms) with 8 MiB parts, a 200 MB `s3://`
 *   fetch: 18–25 ms of hashing after the last byte before, 0–7 ms after, same number of requests.
 */
export function planParts(size: number, p: ParallelSettings): PartRange[] {
  const n = p.concurrency;
  const last = Math.ceil(p.partSize / LAST_ROUND_TAPER);
  const body = size >= 2 * n * last ? size - n * last : size;
  const rounds = Math.ceil(Math.ceil(body / p.partSize) / n);
  const length = Math.ceil(body / (rounds * n));
  const parts: PartRange[] = [];
  for (let start = 0; start < body; start += length) parts.push({ start, end: Math.min(body, start + length) });
  for (let start = body; start < size; start += last) parts.push({ start, end: Math.min(size, start + last) });
  return parts;
}

/**
 * Whether to read the object with parallel ranged requests: the plugin honours ranges, the store
 * pins them to a version or a strong ETag, and the object is at least two parts large.
 */
export function rangedEligible(fs: FileSystem, stat: ObjectStat, p: ParallelSettings): boolean {
  return fs.supportsRange && stat.pinnedRanges === true && p.concurrency > 1 && stat.size !== undefined && stat.size >= 2 * p.partSize && (stat.version !== undefined || stat.etag !== undefined);
}

/**
 * Reads the object with up to `concurrency` ranged requests at once, each written at its offset
 * into one file (ObjectFile), every range pinned to the version or ETag `stat` saw. The digest
 * takes the bytes once, in order. A range that fails transiently is retried from its durable
 * prefix (`rangeRetries` times, short backoff); any other failure, the caller's abort, or the
 * object changing (`GW_FETCH_CHANGED`) stops every range, and the caller removes the file.
 */
export async function rangedDownload(
  fs: FileSystem,
  uri: URL,
  path: string,
  stat: RangedStat,
  opts: { signal: AbortSignal; maxBytes: number; onProgress: (bytes: number) => void; tee?: () => Writable; parallel: ParallelSettings; rangeRetries?: number; log?: Logger; sha256Pin?: string },
): Promise<DownloadResult> {
  if (stat.size > opts.maxBytes) throw new GatewayError('GW_FETCH_TOO_LARGE', { uri: redactUri(uri), limit: opts.maxBytes });
  const file = await ObjectFile.create(path, {
    uri,
    maxBytes: opts.maxBytes,
    integrity: stat.integrity,
    onProgress: opts.onProgress,
    writeBuffer: PART_WRITE_BUFFER,
    ...(opts.tee ? { openTee: opts.tee } : {}),
    ...(opts.sha256Pin !== undefined ? { sha256Pin: opts.sha256Pin } : {}),
  });
  const pin = stat.version !== undefined ? { version: stat.version } : { etag: stat.etag! };
  const parts: Part[] = planParts(stat.size, opts.parallel).map((r) => file.part(r.start, r.end));
  // The first failure stops every other range.
  const stop = new AbortController();
  const signal = AbortSignal.any([opts.signal, stop.signal]);
  let next = 0;
  let firstError: unknown;
  const worker = async () => {
    while (next < parts.length && !signal.aborted) {
      const part = parts[next++]!;
      try {
        await readPart(fs, uri, file, part, stat, pin, signal, opts.rangeRetries ?? 0, opts.log);
      } catch (err) {
        firstError ??= opts.signal.aborted ? (opts.signal.reason ?? err) : err;
        stop.abort(firstError);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(opts.parallel.concurrency, parts.length) }, worker));
    if (firstError !== undefined) throw firstError;
    if (opts.signal.aborted) throw opts.signal.reason;
    const result = await file.finish();
    if (result.size !== stat.size) throw fetchError.unavailable(uri, `the store announced ${stat.size} bytes but sent ${result.size}`);
    const problem = await file.integrityProblem();
    if (problem) throw fetchError.unavailable(uri, `the bytes do not match the store's checksum (${problem})`);
    return { ...result, stat, parts: parts.length };
  } finally {
    await Promise.all(parts.map((p) => file.settled(p)));
    await file.close();
  }
}

/** One range, resumed from its durable prefix after a transient failure. */
async function readPart(
  fs: FileSystem,
  uri: URL,
  file: ObjectFile,
  part: Part,
  stat: RangedStat,
  pin: NonNullable<OpenOptions['pin']>,
  signal: AbortSignal,
  retries: number,
  log: Logger | undefined,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await file.settled(part);
    const start = part.start + part.durable;
    if (start >= part.end) return;
    try {
      const opened = await fs.open(uri, { signal, range: { start, end: part.end - 1 }, pin });
      const got = opened.stat;
      // A store that ignores the condition still names what it sent: hold it to the pin.
      if ((pin.version !== undefined && got.version !== undefined && got.version !== pin.version) || (pin.etag !== undefined && got.etag !== undefined && got.etag !== pin.etag) || (got.size !== undefined && got.size !== stat.size)) {
        opened.stream.destroy();
        throw fetchError.changed(uri, `a range came from another version (${got.version ?? got.etag ?? `${got.size} bytes`})`);
      }
      await pipeline(opened.stream, file.writer(part), { signal });
      await file.settled(part);
      if (part.durable !== part.end - part.start) throw fetchError.unavailable(uri, `the range at ${part.start} ended after ${part.durable} of ${part.end - part.start} bytes`);
      return;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (signal.aborted || attempt >= retries || code !== 'GW_FETCH_UNAVAILABLE') throw err;
      const delayMs = 200 * 2 ** attempt;
      log?.warn({ uri: redactUri(uri), start: part.start + part.durable, attempt: attempt + 1, delayMs, code }, 'ranged read failed; retrying the rest of the range');
      await sleep(delayMs, undefined, { signal });
    }
  }
}
