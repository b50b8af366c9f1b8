import { slabPool } from '../../src/download/slab-pool';

/**
 * `bytes` as the bulk client hands them on: chunks cut from pooled slabs, each lent once, a slab
 * taken only when its chunk is asked for (so slabs given back meanwhile are reused).
 */
export function* pooledChunks(bytes: Buffer): Generator<Buffer> {
  for (let at = 0; at < bytes.length; at += slabPool.bytes) {
    const slab = slabPool.take();
    const n = bytes.copy(slab, 0, at, Math.min(at + slabPool.bytes, bytes.length));
    const chunk = slab.subarray(0, n);
    slabPool.lend(chunk);
    slabPool.retire(slab);
    yield chunk;
  }
}
