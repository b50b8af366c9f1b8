import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
    await cache.evict();
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
});
