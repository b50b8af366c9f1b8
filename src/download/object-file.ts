import { type FileHandle, open } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { crc32 } from 'node:zlib';
import { GatewayError } from '../errors/gateway-error';
import { whenRoom } from '../stream-room';
import { FileDigest } from './file-digest';
import type { ObjectStat } from '../plugin-kit/fs-plugin';
import { slabPool } from './slab-pool';
import { redactUri } from '../plugin-kit/uri';

/**
 * Gathered bytes per positional writev of a sequential read: one thread-pool round trip per batch
 * instead of one per 64 KiB socket chunk (the largest cost in a CPU profile of a fetch).
 */
export const SEQUENTIAL_WRITE_BUFFER = 2 * 1024 * 1024;

/** Bytes read back per call when the in-order consumers catch up over parts that arrived out of order. */
const CATCH_UP_CHUNK = 256 * 1024;

/** One byte range of the object, written by one writer at a time, in order. */
export interface Part {
  readonly start: number;
  /** Exclusive; Infinity when the size is unknown (a sequential read without Content-Length). */
  readonly end: number;
  /** Bytes handed to the file (their write was started). */
  issued: number;
  /** Bytes whose write completed: the part's durable prefix. */
  durable: number;
  /** The write in flight, if any (settles, never rejects). */
  inflight?: Promise<void>;
}

export interface ObjectFileOptions {
  uri: URL;
  maxBytes: number;
  integrity?: ObjectStat['integrity'];
  onProgress: (bytes: number) => void;
  /** Opened at the first byte the digest takes; fed every byte once, in order (ADR 0008). */
  openTee?: () => Writable;
  /** Gathered writes per part (one positional writev per batch, not one write per socket chunk); `writer` may set its own. */
  writeBuffer: number;
  /**
   * The SHA-256 the caller pinned. It vouches for every byte more strongly than a store MD5, so
   * that MD5 is computed (from the file) only when the bytes turn out not to be the pinned ones.
   */
  sha256Pin?: string;
}

/**
 * The temporary file of one download and its digests. Bytes arrive through part writers
 * (`writer`), one per byte range, each writing at its own offsets with positional `writev` — no
 * Transform hop, no second stream, one thread-pool round trip per gathered batch.
 *
 * - SHA-256, and a store MD5 when one is checked, are computed on helper threads from the file's
 *   durable prefix (FileDigest, ADR 0035): the download's thread moves bytes only.
 * - The in-order consumers (a CRC32 store checksum, the tee of the upload hand-off) take every byte
 *   exactly once and in order: straight from memory when a chunk starts where they stand (always,
 *   for a sequential read), otherwise by reading the file back once the bytes before it are
 *   durable (the later parts of a parallel read). Without them nothing is read back here.
 *
 * Memory stays bounded: nothing waits in memory for an earlier part.
 */
export class ObjectFile {
  private readonly sha: FileDigest;
  private md5: FileDigest | undefined;
  private integrity?: ObjectStat['integrity'];
  private crc = 0;
  private tee?: Writable;
  /** The one pending wait for room in a full tee, shared by every range it holds. */
  private room: Promise<void> | undefined;
  /** The in-order consumers' position: every byte below it was given to them (or skipped, without any). */
  private ordered = 0;
  /** Bytes handed to the file by every part. */
  private issuedTotal = 0;
  private catching: Promise<void> | undefined;
  private failure?: Error;
  private readonly parts: Part[] = [];
  private scratch?: Buffer;
  private sha256?: string;

  private constructor(
    private readonly fh: FileHandle,
    private readonly path: string,
    private readonly o: ObjectFileOptions,
  ) {
    this.sha = new FileDigest(path, 'sha256');
    this.expect(o.integrity);
  }

  /** The store checksum to verify, when it is known only once the object is opened (before any byte). */
  expect(integrity: ObjectStat['integrity']): void {
    this.integrity = integrity;
    this.md5?.cancel();
    this.md5 = integrity?.algorithm === 'md5' && this.o.sha256Pin === undefined ? new FileDigest(this.path, 'md5') : undefined;
  }

  /** Creates `path` (which must not exist, mode 0600). */
  static async create(path: string, o: ObjectFileOptions): Promise<ObjectFile> {
    // Read and write: later parts are read back for the in-order digest.
    return new ObjectFile(await open(path, 'wx+', 0o600), path, o);
  }

  /** A byte range to fill; parts are tiles of the object, added in any order. */
  part(start: number, end: number): Part {
    const p: Part = { start, end, issued: 0, durable: 0 };
    this.parts.push(p);
    this.parts.sort((a, b) => a.start - b.start);
    return p;
  }

  /**
   * A Writable that fills `part` from its durable prefix on (a retry resumes where the last writer
   * stopped). Its callbacks wait for the file write, and for the tee's room when it fed the tee.
   */
  writer(part: Part, writeBuffer = this.o.writeBuffer): Writable {
    // A retry starts where the durable prefix ends (after `settled`); whatever an earlier writer
    // issued beyond it failed.
    this.issuedTotal -= part.issued - part.durable;
    part.issued = part.durable;
    return new Writable({
      highWaterMark: writeBuffer,
      writev: (chunks, done) =>
        this.write(
          part,
          chunks.map((c) => c.chunk as Buffer),
          done,
        ),
      write: (chunk: Buffer, _enc, done) => this.write(part, [chunk], done),
    });
  }

  private write(part: Part, bufs: Buffer[], done: (err?: Error | null) => void): void {
    if (this.failure) {
      done(this.failure);
      return;
    }
    const at = part.start + part.issued;
    let n = 0;
    for (const b of bufs) n += b.length;
    // The bounds first: neither the digest nor the tee ever sees a byte over them.
    if (part.issued + n > part.end - part.start) {
      done(fetchProblem(this.o.uri, `the store sent more than the ${part.end - part.start} bytes asked for at offset ${part.start}`));
      return;
    }
    this.issuedTotal += n;
    if (this.issuedTotal > this.o.maxBytes) {
      done(new GatewayError('GW_FETCH_TOO_LARGE', { uri: redactUri(this.o.uri), limit: this.o.maxBytes }));
      return;
    }
    let room: Promise<void> | undefined;
    for (let i = 0, offset = at; i < bufs.length; offset += bufs[i]!.length, i++) {
      if (offset === this.ordered && this.catching === undefined) room = this.feedInOrder(bufs[i]!) ?? room;
    }
    part.issued += n;
    this.o.onProgress(this.issuedTotal);
    const written = bufs.length === 1 ? this.fh.write(bufs[0]!, 0, n, at) : this.fh.writev(bufs, at);
    part.inflight = Promise.all([written, room]).then(
      () => {
        // Written (and taken by the in-order consumers): the file's hold on the bulk client's slabs ends (a tee holds its own,
        // lent in `digest`; slab-pool.ts; other buffers are ignored).
        for (const b of bufs) slabPool.recycle(b);
        part.durable += n;
        const contiguous = this.contiguous();
        this.sha.advance(contiguous);
        this.md5?.advance(contiguous);
        if (contiguous > this.ordered) void this.catchUp();
        done();
      },
      (err: unknown) => {
        this.failure ??= err as Error;
        done(err as Error);
      },
    );
  }

  /** Resolves once the part's last write settled (a destroyed writer's write still completes). */
  async settled(part: Part): Promise<void> {
    await part.inflight;
  }

  /** Whether anything takes the bytes in order here (a CRC32 store checksum, the tee). */
  private inOrder(): boolean {
    return this.integrity?.algorithm === 'crc32' || this.o.openTee !== undefined;
  }

  /** Gives one chunk at the in-order position to the CRC32 and the tee; a promise while the tee is full. */
  private feedInOrder(b: Buffer): Promise<void> | undefined {
    this.ordered += b.length;
    if (this.integrity?.algorithm === 'crc32') this.crc = crc32(b, this.crc);
    if (!this.o.openTee) return undefined;
    this.tee ??= openedTee(this.o.openTee);
    // A destroyed tee (its upload failed) drops the bytes; the download goes on for the cache.
    if (this.tee.destroyed) return undefined;
    // The tee holds the chunk beyond the file write: a hold of its own, which its consumer gives back.
    slabPool.lend(b);
    if (this.tee.write(b)) return undefined;
    // One wait for room, whatever number of ranges are held by it (each listening would pile up
    // one drain and one close listener per range on the tee).
    const tee = this.tee;
    this.room ??= new Promise<void>((resolve) =>
      whenRoom(tee, () => {
        this.room = undefined;
        resolve();
      }),
    );
    return this.room;
  }

  /** The end of the durable prefix of the object: parts in order, up to the first gap. */
  private contiguous(): number {
    let pos = 0;
    for (const p of this.parts) {
      if (p.start > pos) break;
      pos = p.start + p.durable;
      if (p.start + p.durable < p.end) break;
    }
    return pos;
  }

  /** Reads back durable bytes the in-order consumers have not seen yet (parts that arrived early). */
  private catchUp(): Promise<void> {
    if (!this.inOrder()) {
      // Nothing here needs the bytes: the digests read the file on their own threads.
      this.ordered = Math.max(this.ordered, this.contiguous());
      return Promise.resolve();
    }
    this.catching ??= (async () => {
      try {
        for (;;) {
          const upTo = this.contiguous();
          if (upTo <= this.ordered) break;
          if (this.o.openTee) {
            // The tee keeps what it is given: a pooled slab, which its consumer gives back.
            const slab = slabPool.take();
            const chunk = slab.subarray(0, Math.min(upTo - this.ordered, slab.length));
            slabPool.lend(chunk);
            slabPool.retire(slab);
            let room: Promise<void> | undefined;
            try {
              await this.readBack(chunk);
              room = this.feedInOrder(chunk);
            } finally {
              slabPool.recycle(chunk);
            }
            await room;
          } else {
            this.scratch ??= Buffer.allocUnsafeSlow(CATCH_UP_CHUNK);
            const chunk = this.scratch.subarray(0, Math.min(upTo - this.ordered, CATCH_UP_CHUNK));
            await this.readBack(chunk);
            this.feedInOrder(chunk);
          }
        }
      } catch (err) {
        this.failure ??= err as Error;
      } finally {
        this.catching = undefined;
      }
    })();
    return this.catching;
  }

  /** Fills `chunk` from the file at the digest's position. */
  private async readBack(chunk: Buffer): Promise<void> {
    const { bytesRead } = await this.fh.read(chunk, 0, chunk.length, this.ordered);
    if (bytesRead !== chunk.length) throw new Error(`short read back at ${this.ordered}: ${bytesRead} of ${chunk.length} bytes`);
  }

  /**
   * Waits until the digest has taken every durable byte; resolves to the SHA-256 and the size.
   * Call once every part's writer finished.
   */
  async finish(): Promise<{ sha256: string; size: number }> {
    while (this.catching !== undefined || this.contiguous() > this.ordered) await (this.catching ?? this.catchUp());
    if (this.failure) throw this.failure;
    const size = this.contiguous();
    if (size !== this.issuedTotal || size !== this.ordered)
      throw fetchProblem(this.o.uri, `the parts do not tile the object (${this.ordered} of ${this.issuedTotal} bytes in order)`);
    this.sha256 = await this.sha.digest(size);
    return { sha256: this.sha256, size };
  }

  /** The store checksum's mismatch, if any (after `finish`, before `close`). */
  async integrityProblem(): Promise<string | undefined> {
    const integrity = this.integrity;
    if (!integrity) return undefined;
    if (integrity.algorithm === 'md5' && this.md5 === undefined) {
      // Pinned: the bytes the caller named are right whatever the store says of them. Other bytes
      // may still be the object's (a pin of another version), and cached for callers without a
      // pin: the store's MD5 decides, read back from the file.
      if (this.sha256 === this.o.sha256Pin) return undefined;
      this.md5 = new FileDigest(this.path, 'md5');
    }
    const actual =
      integrity.algorithm === 'md5'
        ? await this.md5!.digest(this.ordered)
        : integrity.algorithm === 'sha256'
          ? this.sha256
          : (this.crc >>> 0).toString(16).padStart(8, '0');
    return actual === integrity.expected.toLowerCase() ? undefined : `${integrity.algorithm} ${actual} ≠ ${integrity.expected}`;
  }

  /** Closes the file (always; after every writer settled). */
  close(): Promise<void> {
    this.sha.cancel();
    this.md5?.cancel();
    return this.fh.close();
  }
}

function fetchProblem(uri: URL, detail: string): GatewayError {
  return new GatewayError('GW_FETCH_UNAVAILABLE', { uri: redactUri(uri), detail });
}

/** Opens the tee at the first byte. Its owner learns how it ended its own way, not from an 'error' event. */
function openedTee(open: () => Writable): Writable {
  const tee = open();
  tee.on('error', () => undefined);
  return tee;
}
