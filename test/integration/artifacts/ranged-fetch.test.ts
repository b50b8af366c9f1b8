import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Writable } from 'node:stream';
import { join } from 'node:path';
import pino from 'pino';
import { httpPlugin } from '../../../fs-plugins/http';
import { ArtifactFetcher } from '../../../src/artifacts/artifact-fetcher';
import { createConnectGuard } from '../../../src/net/connect-guard';
import { downloadTo } from '../../../src/download/download';
import { FetchProgress } from '../../../src/artifacts/fetch-progress';
import { FetchQueue } from '../../../src/artifacts/fetch-queue';
import type { FileSystem } from '../../../src/plugin-kit/fs-plugin';
import { JarCache } from '../../../src/artifacts/jar-cache';
import { PluginRegistry } from '../../../src/artifacts/plugin-registry';
import { planParts } from '../../../src/download/ranged-download';
import type { Clock } from '../../../src/clock';
import { eventually } from '../../helpers/eventually';
import { ManualClock, stillClock } from '../../helpers/manual-clock';
import { OptionsRegistry, type RawEntry } from '../../../src/config/registry';
import { buildJar } from '../../helpers/jars';
import { type HttpOrigin, type RecordedRequest, startHttpOrigin } from '../../servers/http-origin';

// Parallel ranged reads (src/download/ranged-download.ts) through the HTTP plugin against a real
// node:http origin that serves ranges, honours If-Match, and can replace a file, reset or stall a
// range on request. The plugin contract suite runs the same download on S3, moto and Azurite.

const PART = 256 * 1024;
const parts = (size: number) => planParts(size, { partSize: PART, concurrency: 4 });
const jar = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'pad.bin': randomBytes(3 * 1024 * 1024 + 777) });
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const other = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'pad.bin': randomBytes(3 * 1024 * 1024 + 777) });

describe('parallel ranged reads (HTTP origin)', () => {
  let origin: HttpOrigin;
  let hook: ((r: RecordedRequest) => void) | undefined;
  let dir: string;
  let plugins: PluginRegistry;
  let fs: FileSystem;

  beforeAll(async () => {
    origin = await startHttpOrigin({ files: { '/app.jar': jar }, onRequest: (r) => hook?.(r) });
    const raw = new Map<string, RawEntry>([['user.artifacts.raw-http-enabled', { value: 'true', source: 'test' }]]);
    const config = new OptionsRegistry(httpPlugin.options, httpPlugin.rules).resolve(raw);
    plugins = new PluginRegistry([httpPlugin], () => ({
      config,
      log: pino({ level: 'silent' }),
      guard: createConnectGuard({ enabled: true, allowed: [`127.0.0.1:${origin.port}`] }),
    }));
    fs = plugins.fileSystemFor('http')!;
  });
  afterAll(async () => {
    await plugins?.close();
    await origin?.stop();
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ranged-fetch-'));
    origin.replace('/app.jar', jar);
    origin.breakNextRanges(0);
    origin.stallRangesFrom(undefined);
    origin.paceRanges(undefined);
    origin.takeMaxRangesOpen();
    hook = undefined;
    origin.requests.length = 0;
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const fetcher = async (retries: number) => {
    const cache = new JarCache(join(dir, 'cache'), 1024 ** 3, pino({ level: 'silent' }));
    await cache.init();
    const f = new ArtifactFetcher({
      plugins,
      cache,
      slots: new FetchQueue(2, 8),
      progress: new FetchProgress(),
      allowedSchemes: ['http'],
      maxBytes: 64 * 1024 * 1024,
      timeoutMs: 30_000,
      retries,
      parallel: { partSize: PART, concurrency: 4 },
      progressIntervalMs: 60_000,
      log: pino({ level: 'silent' }),
    });
    return { f, cache };
  };
  const ranged = () => origin.requests.filter((r) => r.method === 'GET' && r.headers.range !== undefined);

  it('reads every part with a ranged GET pinned by If-Match to the ETag the stat saw, and digests the whole jar once', async () => {
    const { f } = await fetcher(0);
    const got = await f.fetch(`${origin.url}/app.jar`);
    expect(got.sha256).toBe(sha(jar));
    expect(got.size).toBe(jar.length);
    const gets = ranged();
    expect(gets).toHaveLength(parts(jar.length).length);
    expect(gets.length % 4).toBe(0); // whole rounds of 4 requests
    const etag = `"${createHash('sha1').update(jar).digest('hex')}"`;
    expect(new Set(gets.map((r) => r.headers['if-match']))).toEqual(new Set([etag]));
    // The parts tile the object exactly: whole rounds, the last one of parts a quarter the size.
    const asked = gets
      .map((r) => /^bytes=(\d+)-(\d+)$/.exec(r.headers.range!)!.slice(1).map(Number) as [number, number])
      .sort((a, b) => a[0] - b[0]);
    expect(asked.map(([start, end]) => ({ start, end: end + 1 }))).toEqual(parts(jar.length));
    expect(asked.at(-1)![1] + 1).toBe(jar.length);
    for (let i = 1; i < asked.length; i++) expect(asked[i]![0]).toBe(asked[i - 1]![1] + 1);
    expect(asked.slice(-4).every(([start, end]) => end + 1 - start <= PART / 4)).toBe(true);
    got.release();
  });

  it('on a slow link a part about to end asks for the next one a request latency ahead, never with more than twice the concurrency open', async () => {
    // 60 ms to the first byte, 1 MiB/s per range: a 256 KiB part streams for ~190 ms. Waiting for
    // its end before asking for the next part left its slot idle for the next request's 60 ms.
    origin.paceRanges({ latencyMs: 60, bytesPerSec: 1024 * 1024 });
    const { f } = await fetcher(0);
    const got = await f.fetch(`${origin.url}/app.jar`);
    expect(got.sha256).toBe(sha(jar));
    expect(ranged()).toHaveLength(parts(jar.length).length);
    const maxOpen = origin.takeMaxRangesOpen();
    expect(maxOpen).toBeGreaterThan(4);
    expect(maxOpen).toBeLessThanOrEqual(8);
    got.release();
  });

  it('an object replaced mid-download fails with GW_FETCH_CHANGED; no partial file is kept or cached', async () => {
    const { f, cache } = await fetcher(2);
    let n = 0;
    hook = (r) => {
      if (r.headers.range !== undefined && ++n === 4) origin.replace('/app.jar', other);
    };
    const err = await f.fetch(`${origin.url}/app.jar`).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string },
    );
    expect(err?.code).toBe('GW_FETCH_CHANGED');
    expect(err?.message).toContain(`${origin.url}/app.jar changed while it was being read`);
    expect(await readdir(cache.tmpDir)).toEqual([]);
    expect(await readdir(join(dir, 'cache', 'blobs')).catch(() => [])).toEqual([]);
    // Not retried as a transient failure with a stale pin: one GET per part at most, no second round.
    expect(ranged().length).toBeLessThanOrEqual(parts(jar.length).length);
  });

  it('a range that breaks off is retried from where its bytes stopped, and the digest is still right', async () => {
    origin.breakNextRanges(2);
    const { f } = await fetcher(2);
    const got = await f.fetch(`${origin.url}/app.jar`);
    expect(got.sha256).toBe(sha(jar));
    const starts = ranged().map((r) => Number(/^bytes=(\d+)-/.exec(r.headers.range!)![1]));
    // Two parts were asked again from inside themselves (resumed at their durable prefix, or their start).
    expect(starts.length).toBe(parts(jar.length).length + 2);
    got.release();
  });

  it('without range retries a broken range fails the download with GW_FETCH_UNAVAILABLE', async () => {
    origin.breakNextRanges(1);
    const file = join(dir, 'x.part');
    const stat = await fs.stat(new URL(`${origin.url}/app.jar`), AbortSignal.timeout(10_000));
    const err = await downloadTo(fs, new URL(`${origin.url}/app.jar`), file, {
      signal: AbortSignal.timeout(10_000),
      maxBytes: 1 << 30,
      onProgress: () => undefined,
      stat,
      parallel: { partSize: PART, concurrency: 4 },
      rangeRetries: 0,
    }).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(err?.code).toBe('GW_FETCH_UNAVAILABLE');
  });

  it("cancellation stops every range promptly with the caller's reason", async () => {
    const plan = parts(jar.length);
    origin.stallRangesFrom(plan[2]!.start);
    const stat = await fs.stat(new URL(`${origin.url}/app.jar`), AbortSignal.timeout(10_000));
    const ac = new AbortController();
    hook = (r) => {
      if (r.headers.range?.startsWith(`bytes=${plan[3]!.start}-`)) setTimeout(() => ac.abort(new Error('cancelled by the test')), 50);
    };
    const progress: number[] = [];
    const err = await downloadTo(fs, new URL(`${origin.url}/app.jar`), join(dir, 'y.part'), {
      signal: ac.signal,
      maxBytes: 1 << 30,
      onProgress: (b) => progress.push(b),
      stat,
      parallel: { partSize: PART, concurrency: 4 },
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toBe('cancelled by the test');
    expect(progress.at(-1)).toBeLessThan(jar.length);
  });

  it('the tee (pipelined upload hand-off) gets every byte once, in order, also when it is slow and later parts are written ahead of it', async () => {
    const chunks: Buffer[] = [];
    const tee = () =>
      new Writable({
        highWaterMark: 64 * 1024,
        write(chunk: Buffer, _enc, done) {
          chunks.push(Buffer.from(chunk));
          setImmediate(done); // a slow receiver: its backpressure must hold the download, not drop bytes
        },
      });
    const stat = await fs.stat(new URL(`${origin.url}/app.jar`), AbortSignal.timeout(10_000));
    const r = await downloadTo(fs, new URL(`${origin.url}/app.jar`), join(dir, 't.part'), {
      signal: AbortSignal.timeout(30_000),
      maxBytes: 1 << 30,
      onProgress: () => undefined,
      stat,
      parallel: { partSize: PART, concurrency: 4 },
      tee,
    });
    expect(r.parts).toBeGreaterThan(1);
    expect(Buffer.concat(chunks).equals(jar)).toBe(true);
    expect(r.sha256).toBe(sha(jar));
  });

  describe('a lone first request (gateway.artifacts.parallel-fetch.lone-stream-rate)', () => {
    const url = () => new URL(`${origin.url}/app.jar`);
    const asked = () => ranged().map((r) => /^bytes=(\d+)-(\d+)$/.exec(r.headers.range!)!.slice(1).map(Number) as [number, number]);
    // Time stands still (stillClock): every byte arrives in no time, so the first request is fast enough alone.
    // Every look at the clock is a second later: the first request is always too slow alone.
    let t = 0;
    const crawling: Clock = { monotonicMs: () => (t += 1000), wallMs: () => Date.now(), setTimer: () => ({ cancel: () => undefined }) };

    it('fast enough alone: the first part, then the rest of the object in one more request, pinned and digested once', async () => {
      const stat = await fs.stat(url(), AbortSignal.timeout(10_000));
      const r = await downloadTo(fs, url(), join(dir, 'one.part'), {
        signal: AbortSignal.timeout(30_000),
        maxBytes: 1 << 30,
        onProgress: () => undefined,
        stat,
        parallel: { partSize: PART, concurrency: 4, loneStreamRate: 1024 ** 2 },
        clock: stillClock,
      });
      expect({ sha256: r.sha256, size: r.size, parts: r.parts, atOnce: r.atOnce }).toEqual({
        sha256: sha(jar),
        size: jar.length,
        parts: 2,
        atOnce: 1,
      });
      const first = parts(jar.length)[0]!;
      expect(asked()).toEqual([
        [0, first.end - 1],
        [first.end, jar.length - 1],
      ]);
      expect(new Set(ranged().map((q) => q.headers['if-match']))).toEqual(new Set([`"${stat.etag}"`]));
    });

    it('too slow alone: the other requests start, and the object is read in the planned parts', async () => {
      const stat = await fs.stat(url(), AbortSignal.timeout(10_000));
      const r = await downloadTo(fs, url(), join(dir, 'many.part'), {
        signal: AbortSignal.timeout(30_000),
        maxBytes: 1 << 30,
        onProgress: () => undefined,
        stat,
        parallel: { partSize: PART, concurrency: 4, loneStreamRate: 1024 ** 2 },
        clock: crawling,
      });
      expect({ sha256: r.sha256, parts: r.parts, atOnce: r.atOnce }).toEqual({
        sha256: sha(jar),
        parts: parts(jar.length).length,
        atOnce: 4,
      });
      expect(
        asked()
          .map(([s, e]) => ({ start: s, end: e + 1 }))
          .sort((a, b) => a.start - b.start),
      ).toEqual(parts(jar.length));
      expect(asked()[0]![0]).toBe(0); // the first request went alone
    });

    it("a hand-off's tee that holds the first request back: the gateway is the limit, not the link, and the object is read in one stream", async () => {
      // The first part (2.5 MiB) is larger than its writer's buffer (2 MiB). The tee takes its
      // first chunk only after 200 ms, so the body is paused by backpressure inside the window.
      // The rate cannot be reached (1 TiB/s), and each look at the clock is 1 ms after the last
      // (the window's timer never fires): judged on its bytes alone, the first request would be
      // "too slow".
      const big = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'pad.bin': randomBytes(12 * 1024 * 1024) });
      origin.replace('/big.jar', big);
      let looks = 0;
      const inWindow: Clock = { monotonicMs: () => looks++, wallMs: () => Date.now(), setTimer: () => ({ cancel: () => undefined }) };
      const chunks: Buffer[] = [];
      let held = false;
      const tee = () =>
        new Writable({
          highWaterMark: 1,
          write(chunk: Buffer, _enc, done) {
            chunks.push(Buffer.from(chunk));
            if (held) done();
            else {
              held = true;
              setTimeout(done, 200);
            }
          },
        });
      const u = new URL(`${origin.url}/big.jar`);
      const stat = await fs.stat(u, AbortSignal.timeout(10_000));
      const r = await downloadTo(fs, u, join(dir, 'held.part'), {
        signal: AbortSignal.timeout(30_000),
        maxBytes: 1 << 30,
        onProgress: () => undefined,
        stat,
        parallel: { partSize: 4 * 1024 * 1024, concurrency: 2, loneStreamRate: 1024 ** 4 },
        tee,
        clock: inWindow,
      });
      expect({ sha256: r.sha256, parts: r.parts, atOnce: r.atOnce }).toEqual({ sha256: sha(big), parts: 2, atOnce: 1 });
      expect(Buffer.concat(chunks).equals(big)).toBe(true);
    });

    it("cancelled while the first request is still being judged: nothing else starts, the caller's reason comes back", async () => {
      origin.stallRangesFrom(0);
      const stat = await fs.stat(url(), AbortSignal.timeout(10_000));
      const ac = new AbortController();
      hook = (q) => {
        if (q.headers.range !== undefined) setTimeout(() => ac.abort(new Error('cancelled by the test')), 50);
      };
      const err = await downloadTo(fs, url(), join(dir, 'c.part'), {
        signal: ac.signal,
        maxBytes: 1 << 30,
        onProgress: () => undefined,
        stat,
        parallel: { partSize: PART, concurrency: 4, loneStreamRate: 1024 ** 3 },
        clock: stillClock,
      }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toBe('cancelled by the test');
      expect(ranged()).toHaveLength(1);
    });

    it('a first request that breaks off is retried from its durable prefix before the verdict', async () => {
      // breakNextRanges resets ranges that do not start at 0: the rest-of-object request breaks once.
      origin.breakNextRanges(1);
      const stat = await fs.stat(url(), AbortSignal.timeout(10_000));
      // The retry's back-off (200 ms) sleeps on the injected clock: time stands still until the test moves it.
      const clock = new ManualClock();
      const download = downloadTo(fs, url(), join(dir, 'r.part'), {
        signal: AbortSignal.timeout(30_000),
        maxBytes: 1 << 30,
        onProgress: () => undefined,
        stat,
        parallel: { partSize: PART, concurrency: 4, loneStreamRate: 1024 ** 2 },
        rangeRetries: 1,
        clock,
      });
      await eventually(() => clock.pending().includes(200), 'the range retry back-off on the injected clock', 20_000, 10);
      await clock.advance(200);
      const r = await download;
      expect({ sha256: r.sha256, atOnce: r.atOnce }).toEqual({ sha256: sha(jar), atOnce: 1 });
      expect(ranged()).toHaveLength(3);
    });
  });

  it('a weak ETag is not a pin: the object is read in one stream', async () => {
    const stat = await fs.stat(new URL(`${origin.url}/weak/app.jar`), AbortSignal.timeout(10_000));
    expect(stat.pinnedRanges).toBeUndefined();
    const r = await downloadTo(fs, new URL(`${origin.url}/weak/app.jar`), join(dir, 'w.part'), {
      signal: AbortSignal.timeout(10_000),
      maxBytes: 1 << 30,
      onProgress: () => undefined,
      stat,
      parallel: { partSize: PART, concurrency: 4 },
    });
    expect({ parts: r.parts, sha256: r.sha256 }).toEqual({ parts: 1, sha256: sha(jar) });
    expect(ranged()).toHaveLength(0);
  });

  it('the size limit holds before any range is asked for', async () => {
    const stat = await fs.stat(new URL(`${origin.url}/app.jar`), AbortSignal.timeout(10_000));
    const err = await downloadTo(fs, new URL(`${origin.url}/app.jar`), join(dir, 'z.part'), {
      signal: AbortSignal.timeout(10_000),
      maxBytes: jar.length - 1,
      onProgress: () => undefined,
      stat,
      parallel: { partSize: PART, concurrency: 4 },
    }).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(err?.code).toBe('GW_FETCH_TOO_LARGE');
    expect(ranged()).toHaveLength(0);
  });
});
