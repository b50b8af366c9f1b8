import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';

const LOCAL_HEADER = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
const EOCD = Buffer.from([0x50, 0x4b, 0x05, 0x06]);
/** An end-of-central-directory record is 22 bytes plus a comment of at most 65535 bytes. */
const EOCD_SEARCH = 22 + 0xffff;

export type JarVerdict =
  | { ok: true; sha256: string; size: number }
  | { ok: false; reason: string; sha256: string; size: number };

/**
 * Passes bytes through unchanged while hashing them (SHA-256) and checking that they form a zip:
 * a local file header at offset 0 and an end-of-central-directory record in the tail. Memory is
 * bounded by the tail window (64 KiB), whatever the jar size.
 */
export class JarInspector extends Transform {
  private readonly hash: Hash = createHash('sha256');
  private head = Buffer.alloc(0);
  /** The last chunks, by reference, covering at least EOCD_SEARCH bytes; joined once in verdict(). */
  private tailChunks: Buffer[] = [];
  private tailBytes = 0;
  private bytes = 0;
  private digest?: string;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    if (this.head.length < 4) this.head = Buffer.concat([this.head, chunk.subarray(0, 4 - this.head.length)]);
    // Keep references, not copies: copying the window for every chunk doubled the bytes touched.
    this.tailChunks.push(chunk);
    this.tailBytes += chunk.length;
    while (this.tailChunks.length > 1 && this.tailBytes - this.tailChunks[0]!.length >= EOCD_SEARCH) {
      this.tailBytes -= this.tailChunks.shift()!.length;
    }
    done(null, chunk);
  }

  get size(): number {
    return this.bytes;
  }

  /** Call after the stream has ended. */
  verdict(): JarVerdict {
    this.digest ??= this.hash.digest('hex');
    const base = { sha256: this.digest, size: this.bytes };
    if (this.bytes === 0) return { ...base, ok: false, reason: 'the file is empty' };
    if (!this.head.equals(LOCAL_HEADER)) return { ...base, ok: false, reason: 'it does not start with a zip local file header (PK\\x03\\x04)' };
    const tail = Buffer.concat(this.tailChunks).subarray(-EOCD_SEARCH);
    const at = tail.lastIndexOf(EOCD);
    if (at < 0 || tail.length - at < 22) {
      return { ...base, ok: false, reason: 'it has no zip end-of-central-directory record (truncated or not a zip)' };
    }
    const entries = tail.readUInt16LE(at + 10);
    if (entries === 0) return { ...base, ok: false, reason: 'the zip has no entries' };
    return { ...base, ok: true };
  }
}
