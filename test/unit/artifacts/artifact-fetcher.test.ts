import { Writable } from 'node:stream';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import pino from 'pino';
import { ArtifactFetcher } from '../../../src/artifacts/artifact-fetcher';
import { fetchError } from '../../../src/plugin-kit/fetch-error';
import { FetchProgress } from '../../../src/artifacts/fetch-progress';
import type { FileSystem, FsPluginDefinition, ObjectStat } from '../../../src/plugin-kit/fs-plugin';
import { JarCache } from '../../../src/artifacts/jar-cache';
import { PluginRegistry } from '../../../src/artifacts/plugin-registry';
import { FetchQueue } from '../../../src/artifacts/fetch-queue';
import type { Clock } from '../../../src/clock';
import { eventually } from '../../helpers/eventually';
import { buildJar } from '../../helpers/jars';
import { ManualClock } from '../../helpers/manual-clock';

/**
 * A fake store (in memory) standing in for a plugin, to exercise the fetcher's own logic: policy,
 * single-flight, cache revalidation, pins, limits, retries. Real stores are covered by the
 * contract suite and the e2e tests.
 */
class MemoryStore implements FileSystem {
  readonly supportsRange = false;
  objects = new Map<string, { bytes: Buffer; stat: ObjectStat }>();
  opens = 0;
  failNextOpens = 0;
  /** Bodies that end with a transient error after their first chunk (a reset mid-body). */
  breakNextBodies = 0;
  gate?: Promise<void>;

  put(path: string, bytes: Buffer, stat: ObjectStat = {}) {
    this.objects.set(path, { bytes, stat: { size: bytes.length, ...stat } });
  }
  async stat(uri: URL): Promise<ObjectStat> {
    const o = this.objects.get(uri.pathname);
    if (!o) throw fetchError.notFound(uri, '404');
    return o.stat;
  }
  async open(uri: URL) {
    this.opens++;
    if (this.failNextOpens > 0) {
      this.failNextOpens--;
      throw fetchError.unavailable(uri, '503 SlowDown');
    }
    await this.gate;
    const o = this.objects.get(uri.pathname);
    if (!o) throw fetchError.notFound(uri, '404');
    if (this.breakNextBodies > 0) {
      this.breakNextBodies--;
      const stream = new Readable({ read() {} });
      stream.push(o.bytes.subarray(0, 10));
      setImmediate(() => stream.destroy(fetchError.unavailable(uri, 'connection reset')));
      return { stream, stat: o.stat };
    }
    return { stream: Readable.from([o.bytes.subarray(0, 10), o.bytes.subarray(10)]), stat: o.stat };
  }
  async close() {}
}

describe('ArtifactFetcher', () => {
  let dir: string;
  let store: MemoryStore;
  let fetcher: ArtifactFetcher;
  const jar = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': randomBytes(500) });
  const sha = createHash('sha256').update(jar).digest('hex');

  const make = (over: Partial<{ maxBytes: number; max: number; queue: number; clock: Clock; shutdown: AbortSignal }> = {}) => {
    const plugin: FsPluginDefinition = { name: 'mem', schemes: ['mem'], options: [], create: () => store };
    const cache = new JarCache(join(dir, 'cache'), 1024 ** 3, pino({ level: 'silent' }));
    return cache.init().then(
      () =>
        new ArtifactFetcher({
          plugins: new PluginRegistry([plugin], () => ({}) as never),
          cache,
          slots: new FetchQueue(over.max ?? 4, over.queue ?? 32),
          progress: new FetchProgress(),
          allowedSchemes: ['mem'],
          maxBytes: over.maxBytes ?? 1024 * 1024,
          timeoutMs: 10_000,
          retries: 2,
          progressIntervalMs: 1000,
          log: pino({ level: 'silent' }),
          ...(over.clock ? { clock: over.clock } : {}),
          ...(over.shutdown ? { shutdown: over.shutdown } : {}),
        }),
    );
  };

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fetcher-test-'));
    store = new MemoryStore();
    store.put('/app.jar', jar, { etag: 'v1' });
    fetcher = await make();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('downloads, verifies and names the jar after the URI', async () => {
    const got = await fetcher.fetch('mem://bucket/app.jar');
    expect(got).toMatchObject({ sha256: sha, size: jar.length, name: 'app.jar', uri: 'mem://bucket/app.jar', fromCache: false });
    got.release();
  });

  it('does not download an unchanged object again (same ETag)', async () => {
    (await fetcher.fetch('mem://bucket/app.jar')).release();
    const again = await fetcher.fetch('mem://bucket/app.jar');
    expect(again.fromCache).toBe(true);
    expect(store.opens).toBe(1);
    store.put('/app.jar', jar, { etag: 'v2' });
    expect((await fetcher.fetch('mem://bucket/app.jar')).fromCache).toBe(false);
    expect(store.opens).toBe(2);
  });

  it('never hands off a cached blob that changed on disk, pinned or not: it is checked and downloaded again', async () => {
    const first = await fetcher.fetch('mem://bucket/app.jar', { sha256: sha });
    first.release();
    const planted = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: evil.X\n', 'evil/X.class': randomBytes(500) });
    writeFileSync(first.path, planted);
    for (const pin of [sha, undefined]) {
      const again = await fetcher.fetch('mem://bucket/app.jar', pin ? { sha256: pin } : {});
      expect(again.fromCache).toBe(false);
      expect(createHash('sha256').update(readFileSync(again.path)).digest('hex')).toBe(sha);
      again.release();
      writeFileSync(again.path, planted);
    }
    expect(store.opens).toBe(3);
  });

  it('keeps its cache in a private directory and refuses one others may write', async () => {
    const shared = join(dir, 'shared-cache');
    mkdirSync(shared, { mode: 0o777 });
    chmodSync(shared, 0o777);
    await expect(new JarCache(shared, 1024, pino({ level: 'silent' })).init()).rejects.toThrow(/writable by every user/);
    const fresh = join(dir, 'fresh', 'cache');
    await new JarCache(fresh, 1024, pino({ level: 'silent' })).init();
    expect(statSync(fresh).mode & 0o777).toBe(0o700);
    if (process.getuid?.() === 0) {
      const foreign = join(dir, 'foreign-cache');
      mkdirSync(foreign, { mode: 0o700 });
      chownSync(foreign, 65534, 65534);
      await expect(new JarCache(foreign, 1024, pino({ level: 'silent' })).init()).rejects.toThrow(/owned by uid 65534/);
    }
    const got = await fetcher.fetch('mem://bucket/app.jar');
    expect(statSync(got.path).mode & 0o077).toBe(0);
    got.release();
  });

  it('shares one download among concurrent requests for one URI', async () => {
    let open!: () => void;
    store.gate = new Promise((r) => (open = r));
    const all = Array.from({ length: 10 }, () => fetcher.fetch('mem://bucket/app.jar'));
    setTimeout(open, 50);
    const got = await Promise.all(all);
    expect(new Set(got.map((g) => g.sha256))).toEqual(new Set([sha]));
    expect(store.opens).toBe(1);
  });

  it('re-fetches an object without ETag or version unless a pin matches the cached digest', async () => {
    store.put('/plain.jar', jar, {});
    (await fetcher.fetch('mem://bucket/plain.jar')).release();
    (await fetcher.fetch('mem://bucket/plain.jar')).release();
    expect(store.opens).toBe(2);
    expect((await fetcher.fetch('mem://bucket/plain.jar', { sha256: sha })).fromCache).toBe(true);
    expect(store.opens).toBe(2);
  });

  it('refuses a pin mismatch', async () => {
    await expect(fetcher.fetch('mem://bucket/app.jar', { sha256: 'a'.repeat(64) })).rejects.toMatchObject({
      code: 'GW_FETCH_DIGEST_MISMATCH',
    });
  });

  it('refuses an object whose declared size is over the limit, without reading it', async () => {
    store.put('/big.jar', jar, { size: 10 * 1024 * 1024 });
    await expect(fetcher.fetch('mem://bucket/big.jar')).rejects.toMatchObject({ code: 'GW_FETCH_TOO_LARGE' });
    expect(store.opens).toBe(0);
  });

  it('refuses bytes over the limit while streaming, and keeps no partial file', async () => {
    const f = await make({ maxBytes: 100 });
    store.put('/liar.jar', jar, { size: undefined });
    await expect(f.fetch('mem://bucket/liar.jar')).rejects.toMatchObject({ code: 'GW_FETCH_TOO_LARGE' });
    expect(readdirSync(join(dir, 'cache', 'tmp'))).toEqual([]);
    expect(readdirSync(join(dir, 'cache', 'blobs'))).toEqual([]);
  });

  it('refuses something that is not a jar', async () => {
    store.put('/x.jar', randomBytes(1000), { etag: 'x' });
    await expect(fetcher.fetch('mem://bucket/x.jar')).rejects.toMatchObject({ code: 'GW_FETCH_NOT_JAR' });
    expect(readdirSync(join(dir, 'cache', 'blobs'))).toEqual([]);
  });

  it('retries transient failures, not permanent ones', async () => {
    store.failNextOpens = 2;
    expect((await fetcher.fetch('mem://bucket/app.jar')).sha256).toBe(sha);
    expect(store.opens).toBe(3);
    await expect(fetcher.fetch('mem://bucket/missing.jar')).rejects.toMatchObject({ code: 'GW_FETCH_NOT_FOUND' });
  });

  it('sleeps its retry back-offs (500 ms, then 1000 ms) on the injected clock, not in real time', async () => {
    const clock = new ManualClock();
    const f = await make({ clock });
    store.failNextOpens = 2;
    const got = f.fetch('mem://bucket/app.jar');
    await eventually(() => clock.pending().length > 0, 'the first back-off on the injected clock', 10_000, 10);
    expect({ opens: store.opens, pending: clock.pending() }).toEqual({ opens: 1, pending: [500] });
    await clock.advance(499);
    expect(store.opens).toBe(1);
    await clock.advance(1);
    await eventually(() => clock.pending().length > 0, 'the second back-off on the injected clock', 10_000, 10);
    expect({ opens: store.opens, pending: clock.pending() }).toEqual({ opens: 2, pending: [1000] });
    await clock.advance(1000);
    expect((await got).sha256).toBe(sha);
    expect(store.opens).toBe(3);
  });

  it('a shutdown during a back-off on the injected clock ends the fetch without waiting for the clock', async () => {
    const clock = new ManualClock();
    const shutdown = new AbortController();
    const f = await make({ clock, shutdown: shutdown.signal });
    store.failNextOpens = 1;
    const got = f.fetch('mem://bucket/app.jar');
    await eventually(() => clock.pending().length > 0, 'the back-off on the injected clock', 10_000, 10);
    shutdown.abort();
    await expect(got).rejects.toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
    expect({ opens: store.opens, pending: clock.pending() }).toEqual({ opens: 1, pending: [] });
  });

  it('verifies the store checksum end to end', async () => {
    store.put('/md5.jar', jar, { etag: 'm', integrity: { algorithm: 'md5', expected: createHash('md5').update(jar).digest('hex') } });
    expect((await fetcher.fetch('mem://bucket/md5.jar')).sha256).toBe(sha);
    store.put('/bad.jar', jar, { etag: 'b', integrity: { algorithm: 'crc32', expected: 'deadbeef' } });
    await expect(fetcher.fetch('mem://bucket/bad.jar')).rejects.toMatchObject({ code: 'GW_FETCH_UNAVAILABLE' });
  });

  it('with a SHA-256 pin, checks the store MD5 only when the bytes are not the pinned ones', async () => {
    const md5 = createHash('md5').update(jar).digest('hex');
    const wrong = { algorithm: 'md5' as const, expected: '0'.repeat(32) };
    // The pin vouches for the bytes: the store's MD5 is not computed, so its being wrong does not matter.
    store.put('/m.jar', jar, { etag: 'm', integrity: wrong });
    expect((await fetcher.fetch('mem://bucket/m.jar', { sha256: sha })).sha256).toBe(sha);
    // Not the pinned bytes: the MD5, read back from the file, says they are the object's, so they are
    // cached for a caller without a pin; the pinned caller is refused.
    store.put('/n.jar', jar, { etag: 'n', integrity: { algorithm: 'md5', expected: md5 } });
    await expect(fetcher.fetch('mem://bucket/n.jar', { sha256: 'f'.repeat(64) })).rejects.toMatchObject({
      code: 'GW_FETCH_DIGEST_MISMATCH',
    });
    const opens = store.opens;
    expect((await fetcher.fetch('mem://bucket/n.jar')).fromCache).toBe(true);
    expect(store.opens).toBe(opens);
    // Neither the pinned bytes nor the store's: refused like any checksum failure, and not cached.
    store.put('/o.jar', jar, { etag: 'o', integrity: wrong });
    await expect(fetcher.fetch('mem://bucket/o.jar', { sha256: 'f'.repeat(64) })).rejects.toMatchObject({ code: 'GW_FETCH_UNAVAILABLE' });
    await expect(fetcher.fetch('mem://bucket/o.jar')).rejects.toMatchObject({ code: 'GW_FETCH_UNAVAILABLE' });
  });

  it('refuses disallowed schemes, credentials in the URI and directories', async () => {
    await expect(fetcher.fetch('ftp://host/app.jar')).rejects.toMatchObject({ code: 'GW_FETCH_SCHEME_UNSUPPORTED' });
    await expect(fetcher.fetch('mem://user:pw@bucket/app.jar')).rejects.toMatchObject({ code: 'GW_FETCH_URI_INVALID' });
    await expect(fetcher.fetch('mem://bucket/dir/')).rejects.toMatchObject({ code: 'GW_FETCH_URI_INVALID' });
    await expect(fetcher.fetch('not a uri')).rejects.toMatchObject({ code: 'GW_FETCH_URI_INVALID' });
  });

  /** A tee (the pipelined upload hand-off's side of a download): a Writable that records what it was given. */
  const recordingTap = () => {
    const taps: { name: string; chunks: Buffer[]; aborted?: Error }[] = [];
    const open = (name: string) => {
      const t: (typeof taps)[number] = { name, chunks: [] };
      taps.push(t);
      return new Writable({
        write(chunk: Buffer, _enc, done) {
          t.chunks.push(Buffer.from(chunk));
          done();
        },
        destroy(err, done) {
          if (err) t.aborted = err;
          done(err);
        },
      });
    };
    return { taps, open };
  };

  it('a tap receives every byte of the download its call started, in order, named for the hand-off', async () => {
    const { taps, open } = recordingTap();
    const got = await fetcher.fetch('mem://bucket/app.jar', { tee: open });
    expect(got.teed).toBe(true);
    expect(taps).toHaveLength(1);
    expect(taps[0]!.name).toBe('app.jar');
    expect(Buffer.concat(taps[0]!.chunks).equals(jar)).toBe(true);
    expect(taps[0]!.aborted).toBeUndefined();
    got.release();
  });

  it('only the call that starts a download taps it; requests sharing it and cached jars open no tap', async () => {
    let release!: () => void;
    store.gate = new Promise((r) => (release = r));
    const { taps, open } = recordingTap();
    const all = Array.from({ length: 3 }, () => fetcher.fetch('mem://bucket/app.jar', { tee: open }));
    setTimeout(release, 20);
    const got = await Promise.all(all);
    expect(got.map((g) => g.teed)).toEqual([true, false, false]);
    expect(taps).toHaveLength(1);
    const cached = await fetcher.fetch('mem://bucket/app.jar', { tee: open });
    expect({ fromCache: cached.fromCache, teed: cached.teed, taps: taps.length }).toEqual({ fromCache: true, teed: false, taps: 1 });
  });

  it('an attempt that fed the tap and failed aborts it; the retry downloads without it (not tapped)', async () => {
    store.breakNextBodies = 1;
    const { taps, open } = recordingTap();
    const got = await fetcher.fetch('mem://bucket/app.jar', { tee: open });
    expect(store.opens).toBe(2);
    expect(got.sha256).toBe(sha);
    expect(got.teed).toBe(false);
    expect(taps).toHaveLength(1);
    expect(taps[0]!.aborted).toMatchObject({ code: 'GW_FETCH_UNAVAILABLE' });
  });

  it('an attempt that failed before its first byte leaves the tap to the retry', async () => {
    store.failNextOpens = 1;
    const { taps, open } = recordingTap();
    const got = await fetcher.fetch('mem://bucket/app.jar', { tee: open });
    expect(store.opens).toBe(2);
    expect(got.teed).toBe(true);
    expect(Buffer.concat(taps[0]!.chunks).equals(jar)).toBe(true);
  });

  it('a tapped download that is not a jar fails the fetch and aborts the tap', async () => {
    store.put('/x.jar', randomBytes(1000), { etag: 'x' });
    const { taps, open } = recordingTap();
    await expect(fetcher.fetch('mem://bucket/x.jar', { tee: open })).rejects.toMatchObject({ code: 'GW_FETCH_NOT_JAR' });
    expect(taps[0]!.aborted).toMatchObject({ code: 'GW_FETCH_NOT_JAR' });
  });

  it('answers 503 with Retry-After when the wait queue is full', async () => {
    const f = await make({ max: 1, queue: 0 });
    let open!: () => void;
    store.gate = new Promise((r) => (open = r));
    store.put('/other.jar', jar, { etag: 'o' });
    const first = f.fetch('mem://bucket/app.jar');
    await new Promise((r) => setTimeout(r, 20));
    await expect(f.fetch('mem://bucket/other.jar')).rejects.toMatchObject({
      code: 'GW_FETCH_BUSY',
      status: 503,
      headers: { 'retry-after': '5' },
    });
    open();
    await first;
  });
});
