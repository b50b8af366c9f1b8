import { createHash, type Hash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32 } from 'node:zlib';
import { GatewayError } from '../errors/gateway-error';
import type { FileSystem, ObjectStat } from './fs-plugin';
import { redactUri } from './uri';

/**
 * Hashes (SHA-256, plus the store's own checksum when it offers one), counts and bounds the bytes
 * of a download as they stream to disk, and hands each chunk to the tap, if any, before passing it
 * on: the tap never sees a byte over the size bound, and the slower of the file and the tap sets
 * the pace. (In the meter rather than in a stage of its own: one stream stage less per chunk.)
 */
class Meter extends Transform {
  readonly sha = createHash('sha256');
  private readonly md5?: Hash;
  private crc = 0;
  bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly uri: URL,
    private readonly integrity: ObjectStat['integrity'],
    private readonly onProgress: (bytes: number) => void,
    private readonly tap?: Pick<DownloadTap, 'write'>,
  ) {
    super({ highWaterMark: 1024 * 1024 });
    if (integrity?.algorithm === 'md5') this.md5 = createHash('md5');
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) {
      done(new GatewayError('GW_FETCH_TOO_LARGE', { uri: redactUri(this.uri), limit: this.maxBytes }));
      return;
    }
    this.sha.update(chunk);
    this.md5?.update(chunk);
    if (this.integrity?.algorithm === 'crc32') this.crc = crc32(chunk, this.crc);
    this.onProgress(this.bytes);
    const full = this.tap?.write(chunk);
    if (full) full.then(() => done(null, chunk), done);
    else done(null, chunk);
  }

  /** The store checksum's mismatch, if any. */
  integrityProblem(): string | undefined {
    if (!this.integrity) return undefined;
    const actual = this.integrity.algorithm === 'md5' ? this.md5!.digest('hex') : (this.crc >>> 0).toString(16).padStart(8, '0');
    return actual === this.integrity.expected.toLowerCase() ? undefined : `${this.integrity.algorithm} ${actual} ≠ ${this.integrity.expected}`;
  }
}

/**
 * A second receiver of a download's bytes, fed in order while they are written to the temp file
 * (the pipelined upload hand-off, ADR 0008). It sees unverified bytes: its owner may use them only
 * once the whole fetch has passed every check, and must discard them if the fetch fails.
 */
export interface DownloadTap {
  /**
   * Takes the next chunk. Returns nothing when the receiver can take more at once, else a promise
   * that resolves when it can (its backpressure slows the download); like `Writable.write`, without
   * a promise per chunk. Never rejects: a receiver that failed drops the bytes, and its owner says why.
   */
  write(chunk: Buffer): Promise<void> | undefined;
  /** The download that fed it failed (a retry may follow): the bytes received must never be used. */
  abort(reason: Error): void;
}

export interface DownloadResult {
  sha256: string;
  size: number;
  stat: ObjectStat;
}

/**
 * Streams one object to `file` (a fresh temporary name), checking size and store checksum; with
 * `tap`, each chunk also goes to the tap on the way (see `DownloadTap`).
 */
export async function downloadTo(
  fs: FileSystem,
  uri: URL,
  file: string,
  opts: { signal: AbortSignal; maxBytes: number; onProgress: (bytes: number) => void; tap?: Pick<DownloadTap, 'write'> },
): Promise<DownloadResult> {
  const { stream, stat } = await fs.open(uri, { signal: opts.signal });
  if (stat.size !== undefined && stat.size > opts.maxBytes) {
    stream.destroy();
    throw new GatewayError('GW_FETCH_TOO_LARGE', { uri: redactUri(uri), limit: opts.maxBytes });
  }
  const meter = new Meter(opts.maxBytes, uri, stat.integrity, opts.onProgress, opts.tap);
  // A deep write buffer lets fs.WriteStream gather queued chunks into one writev call instead of one
  // thread-pool write per 64 KiB chunk (the largest cost in a CPU profile of a fetch).
  await pipeline(stream, meter, createWriteStream(file, { flags: 'wx', mode: 0o600, highWaterMark: 2 * 1024 * 1024 }), { signal: opts.signal });
  if (stat.size !== undefined && meter.bytes !== stat.size) {
    throw new GatewayError('GW_FETCH_UNAVAILABLE', { uri: redactUri(uri), detail: `the store announced ${stat.size} bytes but sent ${meter.bytes}` });
  }
  const problem = meter.integrityProblem();
  if (problem) throw new GatewayError('GW_FETCH_UNAVAILABLE', { uri: redactUri(uri), detail: `the bytes do not match the store's checksum (${problem})` });
  return { sha256: meter.sha.digest('hex'), size: meter.bytes, stat };
}
