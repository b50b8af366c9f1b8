import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GatewayError } from '../errors/gateway-error';
import type { FileSystem, ObjectStat } from './fs-plugin';
import { ObjectFile, type Part } from './object-file';
import { redactUri } from './uri';

/**
 * Gathered bytes per positional writev of a sequential read: one thread-pool round trip per batch
 * instead of one per 64 KiB socket chunk (the largest cost in a CPU profile of a fetch).
 */
const SEQUENTIAL_WRITE_BUFFER = 2 * 1024 * 1024;

export interface DownloadResult {
  sha256: string;
  size: number;
  stat: ObjectStat;
}

export interface DownloadOptions {
  signal: AbortSignal;
  maxBytes: number;
  onProgress: (bytes: number) => void;
  tee?: () => Writable;
}

/**
 * Streams one object to `file` (a fresh temporary name, through ObjectFile: positional writev of
 * gathered chunks, the digest in the same pass), checking size and store checksum. With `tee`, a second receiver of the bytes is opened at the first byte — an ordinary
 * `Writable`, fed in order with its backpressure honoured (the pipelined upload hand-off, ADR 0008).
 * It gets the bytes before they are verified: its owner may use them only once the fetch passed
 * every check.
 */
export async function downloadTo(fs: FileSystem, uri: URL, file: string, opts: DownloadOptions): Promise<DownloadResult> {
  // The file first: the body's pipeline must be attached as soon as the body exists (an error it
  // emits in between would have no listener).
  const out = await ObjectFile.create(file, { uri, maxBytes: opts.maxBytes, onProgress: opts.onProgress, writeBuffer: SEQUENTIAL_WRITE_BUFFER, ...(opts.tee ? { openTee: opts.tee } : {}) });
  let stat: ObjectStat;
  let result: { sha256: string; size: number };
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
  } finally {
    if (part) await out.settled(part);
    await out.close();
  }
  if (stat.size !== undefined && result.size !== stat.size) {
    throw new GatewayError('GW_FETCH_UNAVAILABLE', { uri: redactUri(uri), detail: `the store announced ${stat.size} bytes but sent ${result.size}` });
  }
  const problem = out.integrityProblem();
  if (problem) throw new GatewayError('GW_FETCH_UNAVAILABLE', { uri: redactUri(uri), detail: `the bytes do not match the store's checksum (${problem})` });
  return { ...result, stat };
}
