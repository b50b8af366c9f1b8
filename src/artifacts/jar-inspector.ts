import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { DEFAULT_ZIP_LIMITS, readZipEnd, ZIP_TAIL, type ZipLimits } from './zip-bounds';

const LOCAL_HEADER = Buffer.from([0x50, 0x4b, 0x03, 0x04]);

/** `limit`: the option key when a zip-structure bound (not the format) refused the jar. */
export type JarVerdict =
  | { ok: true; sha256: string; size: number }
  | { ok: false; reason: string; limit?: string; sha256: string; size: number };

/**
 * Passes bytes through unchanged while hashing them (SHA-256) and checking that they form a zip:
 * a local file header at offset 0 and an end-of-central-directory record in the tail, within the
 * end records' bounds (entries, central-directory size; see zip-bounds.ts). The manifest's declared
 * size is checked by `inspectJar` on the spooled copy, which reads only the central directory.
 * Memory is bounded by the tail window (64 KiB), whatever the jar size.
 */
export class JarInspector extends Transform {
  /** Absent when the caller computes the digest elsewhere (an upload's spooled copy, on a helper thread). */
  private readonly hash?: Hash;
  private head = Buffer.alloc(0);
  /** The last chunks, by reference, covering at least ZIP_TAIL bytes; joined once in verdict(). */
  private tailChunks: Buffer[] = [];
  private tailBytes = 0;
  private bytes = 0;
  private digest: string | undefined;

  constructor(
    private readonly limits: ZipLimits = DEFAULT_ZIP_LIMITS,
    opts: { hash?: boolean } = {},
  ) {
    super();
    if (opts.hash !== false) this.hash = createHash('sha256');
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.hash?.update(chunk);
    this.bytes += chunk.length;
    if (this.head.length < 4) this.head = Buffer.concat([this.head, chunk.subarray(0, 4 - this.head.length)]);
    // Keep references, not copies: copying the window for every chunk doubled the bytes touched.
    this.tailChunks.push(chunk);
    this.tailBytes += chunk.length;
    while (this.tailChunks.length > 1 && this.tailBytes - this.tailChunks[0]!.length >= ZIP_TAIL) {
      this.tailBytes -= this.tailChunks.shift()!.length;
    }
    done(null, chunk);
  }

  get size(): number {
    return this.bytes;
  }

  /** Call after the stream has ended; `sha256` is the bytes' digest when this inspector does not hash. */
  verdict(sha256?: string): JarVerdict {
    this.digest ??= sha256 ?? this.hash?.digest('hex');
    if (this.digest === undefined) throw new Error('JarInspector.verdict: no digest (the inspector was built without hashing)');
    const base = { sha256: this.digest, size: this.bytes };
    if (this.bytes === 0) return { ...base, ok: false, reason: 'the file is empty' };
    if (!this.head.equals(LOCAL_HEADER))
      return { ...base, ok: false, reason: 'it does not start with a zip local file header (PK\\x03\\x04)' };
    const end = readZipEnd(Buffer.concat(this.tailChunks).subarray(-ZIP_TAIL), this.bytes, this.limits);
    if ('reason' in end) return { ...base, ok: false, ...end };
    if (end.entries === 0) return { ...base, ok: false, reason: 'the zip has no entries' };
    return { ...base, ok: true };
  }
}
