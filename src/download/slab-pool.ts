/**
 * Reuse of the bulk client's 1 MiB read buffers (slabs). A fresh slab per MiB read costs more than
 * the reading itself: a new buffer for every MiB makes socket→file markedly dearer per byte (page
 * faults on new memory, and the garbage collections V8 starts for external memory). So the client takes slabs from this pool, and the consumers that know when a
 * chunk is no longer referenced — the download's file writer once its write completed, and the
 * JobManager upload once its socket sent it — give them back with `recycle` (ADR 0015).
 *
 * Every holder of a lent chunk recycles it once: a chunk with two holders (the file writer and a
 * tee) is lent twice. Whoever a chunk is passed to without keeping it (a PassThrough) passes the
 * duty on with it; the JobManager upload (cluster/streamed-upload.ts) is such a final holder.
 *
 * Giving back is optional: a chunk never recycled is simply collected. A slab returns to the pool
 * only when the client has moved on from it and every chunk cut from it was recycled, so memory is
 * never handed out twice while in use (as long as a caller recycles only chunks it no longer holds).
 */

import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';

const SLAB_BYTES = 1024 * 1024;
/** Free slabs kept; more are dropped. Enough for 8 parallel ranges with a few chunks in flight each. */
const MAX_FREE = 32;
/** Free slabs are released when no slab was taken for this long, so an idle gateway holds none. */
const IDLE_RELEASE_MS = 10_000;

interface SlabState {
  /** Chunks handed out and not recycled yet. */
  out: number;
  /** The client reads into another slab now: no more chunks will be cut from this one. */
  retired: boolean;
}

const states = new WeakMap<ArrayBufferLike, SlabState>();
const free: Buffer[] = [];
let idleTimer: NodeJS.Timeout | undefined;

export const slabPool = {
  bytes: SLAB_BYTES,

  take(): Buffer {
    const slab = free.pop() ?? Buffer.allocUnsafeSlow(SLAB_BYTES);
    states.set(slab.buffer, { out: 0, retired: false });
    armIdleRelease();
    return slab;
  },

  /** A chunk of `slab` is handed out (to be recycled, or collected). */
  lend(chunk: Buffer): void {
    const s = states.get(chunk.buffer);
    if (s !== undefined) s.out++;
  },

  /** The client reads no more into `slab`. */
  retire(slab: Buffer): void {
    const s = states.get(slab.buffer);
    if (s === undefined) return;
    s.retired = true;
    if (s.out === 0) giveBack(slab);
  },

  /**
   * A chunk its holder no longer references (its write completed, nobody else was given it).
   * Anything that is not a chunk of a pooled slab is ignored.
   */
  recycle(chunk: Buffer): void {
    const s = states.get(chunk.buffer);
    if (s === undefined || s.out === 0) return;
    s.out--;
    if (s.out === 0 && s.retired) giveBack(Buffer.from(chunk.buffer, 0, SLAB_BYTES));
  },

  /** Free slabs held now (tests, metrics). */
  get free(): number {
    return free.length;
  },
};

function giveBack(slab: Buffer): void {
  states.delete(slab.buffer);
  if (free.length < MAX_FREE) free.push(slab);
}

function armIdleRelease(): void {
  if (idleTimer !== undefined) idleTimer.refresh();
  else {
    idleTimer = setTimeout(() => {
      idleTimer = undefined;
      free.length = 0;
    }, IDLE_RELEASE_MS);
    idleTimer.unref();
  }
}

/**
 * A file read as a stream of pooled slabs, one MiB per read, each lent to the stream's consumer:
 * a consumer that recycles them (the JobManager upload) reads a file of any size with a few slabs,
 * where `fs.createReadStream` allocates a fresh buffer for every read.
 */
export function slabFileStream(path: string): Readable {
  const file = open(path, 'r');
  // A file that cannot be opened fails the stream at its first read, not as an unhandled rejection.
  file.catch(() => undefined);
  return new Readable({
    highWaterMark: 0,
    read() {
      const slab = slabPool.take();
      file
        .then((fh) => fh.read(slab, 0, SLAB_BYTES, null))
        .then(({ bytesRead }) => {
          const chunk = slab.subarray(0, bytesRead);
          if (bytesRead > 0) slabPool.lend(chunk);
          slabPool.retire(slab);
          this.push(bytesRead > 0 ? chunk : null);
        })
        .catch((err: unknown) => {
          slabPool.retire(slab);
          this.destroy(err as Error);
        });
    },
    destroy(err, done) {
      file
        .then((fh) => fh.close())
        .then(
          () => done(err),
          () => done(err),
        );
    },
  });
}
