import { createHash, randomBytes } from 'node:crypto';
import { existsSync, linkSync, mkdtempSync, rmSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { JarCache } from '../../../src/artifacts/jar-cache';

describe('JarCache', () => {
  let dir: string;
  let now = 0;
  const log = pino({ level: 'silent' });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'jar-cache-'));
    now = 1000;
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function put(cache: JarCache, key: string, sha: string, size: number) {
    const tmp = join(cache.tmpDir, `${key}.part`);
    writeFileSync(tmp, Buffer.alloc(size));
    now += 1;
    return cache.commit(key, tmp, { uri: `s3://b/${key}`, sha256: sha, size });
  }

  it('removes leftover temp files and rebuilds its index from disk at start', async () => {
    const a = new JarCache(dir, 1e9, log, () => now);
    await a.init();
    await put(a, 'k1', 'a'.repeat(64), 10);
    writeFileSync(join(a.tmpDir, 'interrupted.part'), 'half a jar');
    const b = new JarCache(dir, 1e9, log, () => now);
    await b.init();
    expect(existsSync(join(b.tmpDir, 'interrupted.part'))).toBe(false);
    expect(b.lookup('k1')?.sha256).toBe('a'.repeat(64));
  });

  it('evicts least recently used blobs to fit, never one in use', async () => {
    const cache = new JarCache(dir, 25, log, () => now);
    await cache.init();
    await put(cache, 'old', '1'.repeat(64), 10);
    await put(cache, 'held', '2'.repeat(64), 10);
    await put(cache, 'new', '3'.repeat(64), 10);
    const release = cache.hold('2'.repeat(64));
    now += 1;
    cache.hold('3'.repeat(64))(); // touched (used and released): most recent
    expect(cache.stats().remembered).toBe(3);
    await cache.evict();
    expect(cache.stats().remembered).toBe(2); // an evicted blob's identity is forgotten with it
    expect(cache.lookup('old')).toBeUndefined();
    expect(cache.lookup('held')).toBeDefined();
    expect(cache.lookup('new')).toBeDefined();
    // Still over the bound, but the only candidate left is in use or newest-in-use order.
    const tight = new JarCache(dir, 5, log, () => now);
    await tight.init();
    tight.hold('2'.repeat(64));
    await tight.evict();
    expect(tight.lookup('held')).toBeDefined();
    release();
  });

  describe('verifyBlob', () => {
    const bytes = randomBytes(256 * 1024);
    const sha = createHash('sha256').update(bytes).digest('hex');
    async function cached(): Promise<JarCache> {
      const cache = new JarCache(dir, 1e9, log, () => now);
      await cache.init();
      const tmp = join(cache.tmpDir, 'k.part');
      writeFileSync(tmp, bytes);
      utimesSync(tmp, 1_000_000_000, 1_000_000_000); // whole seconds: the rewrite below can set them back exactly
      await cache.commit('k', tmp, { uri: 's3://b/k', sha256: sha, size: bytes.length });
      return cache;
    }

    it('reads an untouched blob again only while something else may change it (a hard link handed out)', async () => {
      const cache = await cached();
      expect(await cache.verifyBlob(sha)).toBe(true);
      expect(cache.stats().hashed).toBe(0); // committed by the download that hashed it
      const handed = join(dir, 'handed.jar');
      linkSync(cache.blobPath(sha), handed);
      const release = cache.hold(sha);
      expect(await Promise.all([cache.verifyBlob(sha), cache.verifyBlob(sha)])).toEqual([true, true]);
      expect(cache.stats().hashed).toBe(1); // one check shared by concurrent callers
      expect(await cache.verifyBlob(sha)).toBe(true);
      expect(cache.stats().hashed).toBe(2); // never remembered while another name exists
      unlinkSync(handed);
      release();
      await cache.settled();
      expect(cache.stats().hashed).toBe(3); // checked once in the background after the release
      expect(await cache.verifyBlob(sha)).toBe(true);
      expect(cache.stats().hashed).toBe(3);
    });

    it('catches a rewrite of the same size whose mtime was set back (the ctime moved), and removes the blob', async () => {
      const cache = await cached();
      const path = cache.blobPath(sha);
      const before = statSync(path, { bigint: true });
      writeFileSync(path, randomBytes(bytes.length));
      utimesSync(path, 1_000_000_000, 1_000_000_000);
      const after = statSync(path, { bigint: true });
      expect([after.size, after.mtimeNs, after.ino]).toEqual([before.size, before.mtimeNs, before.ino]);
      expect(await cache.verifyBlob(sha)).toBe(false);
      expect(existsSync(path)).toBe(false);
      expect(cache.lookup('k')).toBeUndefined();
    });

    it('checks every blob once after a restart', async () => {
      await cached();
      const again = new JarCache(dir, 1e9, log, () => now);
      await again.init();
      expect(await again.verifyBlob(sha)).toBe(true);
      expect(await again.verifyBlob(sha)).toBe(true);
      expect(again.stats().hashed).toBe(1);
    });
  });
});
