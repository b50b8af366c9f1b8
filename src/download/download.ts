import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { Clock } from '../clock';
import { GatewayError } from '../errors/gateway-error';
import type { FileSystem, ObjectStat } from '../plugin-kit/fs-plugin';
import { ObjectFile, type Part, SEQUENTIAL_WRITE_BUFFER } from './object-file';
import { type DownloadResult, type ParallelSettings, rangedDownload, rangedEligible, type RangedStat } from './ranged-download';
import { redactUri } from '../plugin-kit/uri';

export type { DownloadResult };

export interface DownloadOptions {
  signal: AbortSignal;
  maxBytes: number;
  onProgress: (bytes: number) => void;
  tee?: () => Writable;
  /** What `stat` said about the object: decides a parallel ranged read (size, pin, `pinnedRanges`). */
  stat?: ObjectStat;
  /** Parallel ranged reads; absent or `concurrency` 1 = one stream. */
  parallel?: ParallelSettings;
  /** Retries of one failed range (transient failures only). */
  rangeRetries?: number;
  log?: Logger;
  /** The SHA-256 the caller pinned: a store MD5 is then checked only for bytes that do not match it. */
  sha256Pin?: string;
  /** Time for the lone-stream probe of a parallel read (ranged-download.ts); the system clock when absent. */
  clock?: Clock;
}

/**
 * Streams one object to `file` (a fresh temporary name), checking size and store checksum. An
 * object the store serves in pinned ranges (`stat.pinnedRanges`) and at least two parts large is
 * read with `parallel.concurrency` ranged reads at once (ranged-download.ts); anything else in one
 * stream. With `tee`, a second receiver of the bytes is opened at the first byte — an ordinary
 * `Writable`, fed in order with its backpressure honoured (the pipelined upload hand-off, ADR 0008).
 * It gets the bytes before they are verified: its owner may use them only once the fetch passed
 * every check.
 */
export async function downloadTo(fs: FileSystem, uri: URL, file: string, opts: DownloadOptions): Promise<DownloadResult> {
  if (opts.stat && opts.parallel && rangedEligible(fs, opts.stat, opts.parallel)) {
    return rangedDownload(fs, uri, file, opts.stat as RangedStat, { ...opts, parallel: opts.parallel });
  }
  // The file first: the body's pipeline must be attached as soon as the body exists (an error it
  // emits in between would have no listener).
  const out = await ObjectFile.create(file, {
    uri,
    maxBytes: opts.maxBytes,
    onProgress: opts.onProgress,
    writeBuffer: SEQUENTIAL_WRITE_BUFFER,
    ...(opts.tee ? { openTee: opts.tee } : {}),
    ...(opts.sha256Pin !== undefined ? { sha256Pin: opts.sha256Pin } : {}),
  });
  let stat: ObjectStat;
  let result: { sha256: string; size: number };
  let problem: string | undefined;
  let part: Part | undefined;
  try {
    const opened = await fs.open(uri, { signal: opts.signal });
    stat = opened.stat;
    if (stat.size !== undefined && stat.size > opts.maxBytes) {
      opened.stream.destroy();
      throw new GatewayError('GW_FETCH_TOO_LARGE', { uri: redactUri(uri), limit: opts.maxBytes });
    }
    part = out.part(0, stat.size ?? Number.POSITIVE_INFINITY);
    out.expect(stat.integrity);
    await pipeline(opened.stream, out.writer(part), { signal: opts.signal });
    result = await out.finish();
    problem = await out.integrityProblem();
  } finally {
    if (part) await out.settled(part);
    await out.close();
  }
  if (stat.size !== undefined && result.size !== stat.size) {
    throw new GatewayError('GW_FETCH_UNAVAILABLE', {
      uri: redactUri(uri),
      detail: `the store announced ${stat.size} bytes but sent ${result.size}`,
    });
  }
  if (problem)
    throw new GatewayError('GW_FETCH_UNAVAILABLE', {
      uri: redactUri(uri),
      detail: `the bytes do not match the store's checksum (${problem})`,
    });
  return { ...result, stat, parts: 1, atOnce: 1 };
}
