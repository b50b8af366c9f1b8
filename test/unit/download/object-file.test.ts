import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ObjectFile } from '../../../src/download/object-file';
import { slabPool } from '../../../src/download/slab-pool';
import { pooledChunks } from '../../helpers/slabs';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'object-file-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ObjectFile store checksums', () => {
  const bytes = randomBytes(200_000);
  const sha256 = createHash('sha256').update(bytes).digest('hex');

  async function written(
    name: string,
    integrity: { algorithm: 'sha256' | 'md5' | 'crc32'; expected: string },
    sha256Pin?: string,
  ): Promise<string | undefined> {
    const file = await ObjectFile.create(join(dir, name), {
      uri: new URL('s3://b/k'),
      maxBytes: 1 << 20,
      integrity,
      onProgress: () => undefined,
      writeBuffer: 64 * 1024,
      ...(sha256Pin ? { sha256Pin } : {}),
    });
    const part = file.part(0, bytes.length);
    await pipeline(Readable.from([bytes.subarray(0, 70_000), bytes.subarray(70_000)]), file.writer(part));
    await file.settled(part);
    expect((await file.finish()).sha256).toBe(sha256);
    try {
      return await file.integrityProblem();
    } finally {
      await file.close();
    }
  }
  const md5 = createHash('md5').update(bytes).digest('hex');

  it('a stored SHA-256 is compared with the digest computed anyway', async () => {
    expect(await written('ok', { algorithm: 'sha256', expected: sha256.toUpperCase() })).toBeUndefined();
    expect(await written('bad', { algorithm: 'sha256', expected: '0'.repeat(64) })).toBe(`sha256 ${sha256} ≠ ${'0'.repeat(64)}`);
  });

  it('with a SHA-256 pin the store MD5 is checked only for bytes that are not the pinned ones (read back from the file)', async () => {
    // The pinned bytes: the pin vouches for them, whatever the store's MD5 says (it is not computed).
    expect(await written('pinned', { algorithm: 'md5', expected: '0'.repeat(32) }, sha256)).toBeUndefined();
    // Another version's bytes (the pin is someone else's): the MD5 decides whether they are the object's.
    expect(await written('other-ok', { algorithm: 'md5', expected: md5 }, 'f'.repeat(64))).toBeUndefined();
    expect(await written('other-bad', { algorithm: 'md5', expected: '0'.repeat(32) }, 'f'.repeat(64))).toBe(
      `md5 ${md5} ≠ ${'0'.repeat(32)}`,
    );
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

describe('ObjectFile with a tee, on pooled slabs', () => {
  it('the tee holds its own share of each slab: a slab is reused only once the file and the tee let go', async () => {
    const bytes = randomBytes(9 * slabPool.bytes + 4321);
    const half = 5 * slabPool.bytes;
    const teed: Buffer[] = [];
    // A consumer that takes each chunk at once but reads it only later and then gives it back, as
    // the JobManager upload does once its socket sent it: a slab reused too early shows in what it read.
    let sent = Promise.resolve();
    const tee = () =>
      new Writable({
        write(chunk: Buffer, _enc, done) {
          sent = sent.then(async () => {
            await new Promise((resolve) => setTimeout(resolve, 3));
            teed.push(Buffer.from(chunk));
            slabPool.recycle(chunk);
          });
          done();
        },
      });
    const file = await ObjectFile.create(join(dir, 'teed'), {
      uri: new URL('https://h/a.jar'),
      maxBytes: 1 << 30,
      onProgress: () => undefined,
      openTee: tee,
      writeBuffer: 4 * 1024 * 1024,
    });
    // Two parts, the later one first: its bytes reach the tee read back from the file (in slabs too).
    const later = file.part(half, bytes.length);
    const first = file.part(0, half);
    await pipeline(Readable.from(pooledChunks(bytes.subarray(half))), file.writer(later));
    await pipeline(Readable.from(pooledChunks(bytes.subarray(0, half))), file.writer(first));
    await file.settled(first);
    await file.settled(later);
    const { sha256 } = await file.finish();
    await file.close();
    await sent;
    expect(sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(Buffer.concat(teed).equals(bytes)).toBe(true);
  });
});
