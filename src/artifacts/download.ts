import { createHash, type Hash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { Transform, type TransformCallback, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32 } from 'node:zlib';
import { GatewayError } from '../errors/gateway-error';
import { whenRoom } from '../stream-room';
import type { FileSystem, ObjectStat } from './fs-plugin';
import { redactUri } from './uri';

/**
 * Hashes (SHA-256, plus the store's own checksum when it offers one), counts and bounds the bytes
 * of a download as they stream to disk, and writes each chunk to the tee, if any, before passing it
 * on: the tee never sees a byte over the size bound, and the slower of the file and the tee sets
 * the pace. (In the meter rather than in a stage of its own: one stream stage less per chunk.)
 */
class Meter extends Transform {
  readonly sha = createHash('sha256');
  private readonly md5?: Hash;
  private crc = 0;
  private tee?: Writable;
  bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly uri: URL,
    private readonly integrity: ObjectStat['integrity'],
    private readonly onProgress: (bytes: number) => void,
    private readonly openTee?: () => Writable,
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
    if (this.openTee && !this.tee) this.tee = openedTee(this.openTee);
    const tee = this.tee;
    // A destroyed tee (its upload failed) drops the bytes; the download goes on for the cache.
    if (!tee || tee.destroyed || tee.write(chunk)) {
      done(null, chunk);
      return;
    }
    whenRoom(tee, () => done(null, chunk));
  }

  /** The store checksum's mismatch, if any. */
  integrityProblem(): string | undefined {
    if (!this.integrity) return undefined;
    const actual = this.integrity.algorithm === 'md5' ? this.md5!.digest('hex') : (this.crc >>> 0).toString(16).padStart(8, '0');
    return actual === this.integrity.expected.toLowerCase() ? undefined : `${this.integrity.algorithm} ${actual} ≠ ${this.integrity.expected}`;
  }
}

/** Opens the tee at the first byte. Its owner learns how it ended its own way, not from an 'error' event. */
function openedTee(open: () => Writable): Writable {
  const tee = open();
  tee.on('error', () => undefined);
  return tee;
}

export interface DownloadResult {
  sha256: string;
  size: number;
  stat: ObjectStat;
}

/**
 * Streams one object to `file` (a fresh temporary name), checking size and store checksum. With
 * `tee`, a second receiver of the bytes is opened at the first byte — an ordinary `Writable`, fed
 * in order with its backpressure honoured (the pipelined upload hand-off, ADR 0008). It gets the
 * bytes before they are verified: its owner may use them only once the fetch passed every check.
 */
export async function downloadTo(
  fs: FileSystem,
  uri: URL,
  file: string,
  opts: { signal: AbortSignal; maxBytes: number; onProgress: (bytes: number) => void; tee?: () => Writable },
): Promise<DownloadResult> {
  const { stream, stat } = await fs.open(uri, { signal: opts.signal });
  if (stat.size !== undefined && stat.size > opts.maxBytes) {
    stream.destroy();
    throw new GatewayError('GW_FETCH_TOO_LARGE', { uri: redactUri(uri), limit: opts.maxBytes });
  }
  const meter = new Meter(opts.maxBytes, uri, stat.integrity, opts.onProgress, opts.tee);
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
