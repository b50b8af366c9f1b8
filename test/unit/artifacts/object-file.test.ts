import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ObjectFile } from '../../../src/artifacts/object-file';
import { slabPool } from '../../../src/artifacts/slab-pool';

describe('ObjectFile store checksums', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'object-file-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const bytes = randomBytes(200_000);
  const sha256 = createHash('sha256').update(bytes).digest('hex');

  async function written(name: string, integrity: { algorithm: 'sha256' | 'md5' | 'crc32'; expected: string }): Promise<string | undefined> {
    const file = await ObjectFile.create(join(dir, name), { uri: new URL('s3://b/k'), maxBytes: 1 << 20, integrity, onProgress: () => undefined, writeBuffer: 64 * 1024 });
    const part = file.part(0, bytes.length);
    await pipeline(Readable.from([bytes.subarray(0, 70_000), bytes.subarray(70_000)]), file.writer(part));
    await file.settled(part);
    expect((await file.finish()).sha256).toBe(sha256);
    await file.close();
    return file.integrityProblem();
  }

  it('a stored SHA-256 is compared with the digest computed anyway', async () => {
    expect(await written('ok', { algorithm: 'sha256', expected: sha256.toUpperCase() })).toBeUndefined();
    expect(await written('bad', { algorithm: 'sha256', expected: '0'.repeat(64) })).toBe(`sha256 ${sha256} ≠ ${'0'.repeat(64)}`);
  });

  it('MD5 and CRC32 as before', async () => {
    expect(await written('md5', { algorithm: 'md5', expected: createHash('md5').update(bytes).digest('hex') })).toBeUndefined();
    expect(await written('crc', { algorithm: 'crc32', expected: '00000000' })).toMatch(/^crc32 [0-9a-f]{8} ≠ 00000000$/);
  });
});

describe('slabPool', () => {
  it('reuses a slab only once the client moved on and every chunk of it was recycled', () => {
    const slab = slabPool.take();
    const a = slab.subarray(0, 100);
    const b = slab.subarray(100, 300);
    slabPool.lend(a);
    slabPool.lend(b);
    const before = slabPool.free;
    slabPool.recycle(a);
    slabPool.retire(slab);
    expect(slabPool.free).toBe(before); // b is still out
    slabPool.recycle(b);
    expect(slabPool.free).toBe(before + 1);
    slabPool.recycle(b); // a second recycle of the same chunk is ignored
    expect(slabPool.free).toBe(before + 1);
    expect(slabPool.take().buffer).toBe(slab.buffer);
  });

  it('ignores buffers that are not its own', () => {
    const before = slabPool.free;
    slabPool.recycle(Buffer.alloc(1024 * 1024));
    expect(slabPool.free).toBe(before);
  });
});
