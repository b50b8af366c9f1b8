import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DownloadResult, downloadTo } from '../../src/download/download';
import { type ParallelSettings, planParts } from '../../src/download/ranged-download';
import type { Clock } from '../../src/clock';
import { stillClock } from '../helpers/manual-clock';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { heldBufferBytes } from '../helpers/held-buffers';
import { readAll } from './plugin-fixtures';

/**
 * What every fs-plugin must do, run against each plugin's real server (Azurite, the SigV4-checking
 * S3 server, node:http(s) origins). A plugin's test file calls `fsPluginContract` with a fixture.
 */
export interface ContractFixture {
  /** Configured with the right credentials; may reach the test server (exempted from the SSRF guard). */
  fs: FileSystem;
  /** Same store, wrong credentials (or none where the object needs them). */
  wrongCredentialsFs: FileSystem;
  /** Same plugin and credentials, but the test server is NOT exempted from the restricted-host guard. */
  guardedFs: FileSystem;
  /** A small object and its exact bytes. */
  small: { uri: URL; content: Buffer };
  /** A large object (tens of MiB) and its SHA-256. */
  large: { uri: URL; size: number; sha256: string };
  /** A URI in an existing bucket/container/origin whose object does not exist. */
  missing: URL;
  /** Strings that must never appear in an error message (secrets, SAS signatures). */
  secrets: string[];
  close(): Promise<void>;
}

function expectCode(err: unknown, code: string, secrets: string[]): void {
  expect((err as { code?: string }).code).toBe(code);
  const text = `${(err as Error).message} ${JSON.stringify(err)}`;
  for (const s of secrets) expect(text).not.toContain(s);
}

export interface ContractOptions {
  /** The plugin opens no network connections (file://), so the restricted-host case is skipped, visibly. */
  guardNotApplicable?: boolean;
  /**
   * The plugin does not honour `range` (`supportsRange: false`): the ranged-read case is then skipped,
   * visibly, instead of passing without asserting anything. Known when the suite is registered
   * (the fixture exists only later), and checked against the plugin's own declaration.
   */
  rangeNotSupported?: boolean;
  /**
   * The plugin's store cannot pin a range to a version (`pinnedRanges` never set: a local file, a
   * store without a strong validator): the pinned-range and parallel-read cases are skipped, visibly,
   * and its stat is checked not to claim it.
   */
  pinnedRangesNotSupported?: boolean;
}

export function fsPluginContract(name: string, setup: () => Promise<ContractFixture>, options: ContractOptions = {}): void {
  describe(`fs-plugin contract: ${name}`, () => {
    let fx: ContractFixture;
    const signal = () => AbortSignal.timeout(60_000);

    beforeAll(async () => {
      fx = await setup();
    }, 300_000);
    afterAll(async () => fx?.close());

    it('stat reports the size of an existing object', async () => {
      const st = await fx.fs.stat(fx.small.uri, signal());
      expect(st.size).toBe(fx.small.content.length);
    });

    it('open streams the exact bytes', async () => {
      const { stream } = await fx.fs.open(fx.small.uri, { signal: signal() });
      expect((await readAll(stream)).equals(fx.small.content)).toBe(true);
    });

    it('stat and open of a missing object → GW_FETCH_NOT_FOUND', async () => {
      await fx.fs.stat(fx.missing, signal()).then(
        () => fail('stat resolved'),
        (e) => expectCode(e, 'GW_FETCH_NOT_FOUND', fx.secrets),
      );
      await fx.fs.open(fx.missing, { signal: signal() }).then(
        () => fail('open resolved'),
        (e) => expectCode(e, 'GW_FETCH_NOT_FOUND', fx.secrets),
      );
    });

    it('wrong credentials → GW_FETCH_DENIED, with no secret in the message', async () => {
      await fx.wrongCredentialsFs.stat(fx.small.uri, signal()).then(
        () => fail('stat resolved'),
        (e) => expectCode(e, 'GW_FETCH_DENIED', fx.secrets),
      );
      await fx.wrongCredentialsFs.open(fx.small.uri, { signal: signal() }).then(
        () => fail('open resolved'),
        (e) => expectCode(e, 'GW_FETCH_DENIED', fx.secrets),
      );
    });

    (options.guardNotApplicable ? it.skip : it)('a restricted address is refused at connect time unless exempted', async () => {
      await fx.guardedFs.open(fx.small.uri, { signal: signal() }).then(
        () => fail('open resolved'),
        (e) => expectCode(e, 'GW_FETCH_RESTRICTED_HOST', fx.secrets),
      );
    });

    it('streams a large object with the right digest, bounded chunks and bounded buffering', async () => {
      // Deterministic, unlike an RSS bound (GC timing made that one fail once in a few runs): after the
      // first chunk the reader stops for a while, then a forced GC measures the Buffer memory still held.
      // A plugin that respects backpressure holds a few MiB however long the pause; one that buffers
      // the object holds most of it. Memory per fetch over time is measured in bench/ (memory.ts).
      // The baseline is taken before `open`: a plugin that reads the whole object inside `open`
      // (and then streams slices of it) would otherwise be measured from an already-full heap.
      const base = heldBufferBytes();
      const { stream } = await fx.fs.open(fx.large.uri, { signal: signal() });
      const hash = createHash('sha256');
      let size = 0;
      let maxChunk = 0;
      let held: number | undefined;
      for await (const c of stream) {
        const chunk = c as Buffer;
        hash.update(chunk);
        size += chunk.length;
        maxChunk = Math.max(maxChunk, chunk.length);
        if (held === undefined) {
          await new Promise((r) => setTimeout(r, 500));
          held = heldBufferBytes() - base;
        }
      }
      expect(size).toBe(fx.large.size);
      expect(hash.digest('hex')).toBe(fx.large.sha256);
      expect(maxChunk).toBeLessThanOrEqual(8 * 1024 * 1024);
      expect(held).toBeDefined();
      // Half the object: a buffering plugin holds all of it but the first chunk (≥ 31 MiB of 32).
      expect(fx.large.size).toBeGreaterThanOrEqual(32 * 1024 * 1024);
      expect(held!).toBeLessThan(fx.large.size / 2);
    }, 120_000);

    it('abort mid-stream ends the stream promptly with an error', async () => {
      const ac = new AbortController();
      const { stream } = await fx.fs.open(fx.large.uri, { signal: ac.signal });
      let received = 0;
      const failure = await (async () => {
        for await (const c of stream) {
          received += (c as Buffer).length;
          if (received > 1024 * 1024 && !ac.signal.aborted) ac.abort();
        }
      })().then(
        () => undefined,
        (err: unknown) => err as { name?: string },
      );
      // The caller's abort, not a store or network failure the fetcher would retry or report as one.
      expect(failure?.name).toBe('AbortError');
      // Promptly: the stream ended before the object did (an order, not a time bound).
      expect(received).toBeLessThan(fx.large.size);
    });

    it(`declares supportsRange: ${!options.rangeNotSupported} (as its contract options say)`, () => {
      expect(fx.fs.supportsRange).toBe(!options.rangeNotSupported);
    });

    (options.rangeNotSupported ? it.skip : it)('ranged reads return exactly the requested bytes', async () => {
      const { stream } = await fx.fs.open(fx.small.uri, { signal: signal(), range: { start: 2, end: 5 } });
      expect((await readAll(stream)).equals(fx.small.content.subarray(2, 6))).toBe(true);
    });

    const pinned = !options.rangeNotSupported && !options.pinnedRangesNotSupported;
    it(`stat ${pinned ? 'claims' : 'does not claim'} pinnedRanges (as its contract options say)`, async () => {
      expect((await fx.fs.stat(fx.small.uri, signal())).pinnedRanges === true).toBe(pinned);
    });

    (pinned ? it : it.skip)('a range pinned to the current ETag reads; pinned to another → GW_FETCH_CHANGED', async () => {
      const st = await fx.fs.stat(fx.small.uri, signal());
      expect(st.pinnedRanges).toBe(true);
      expect(st.etag).toBeDefined();
      const { stream } = await fx.fs.open(fx.small.uri, { signal: signal(), range: { start: 1, end: 3 }, pin: { etag: st.etag! } });
      expect((await readAll(stream)).equals(fx.small.content.subarray(1, 4))).toBe(true);
      const stale = '0123456789abcdef0123456789abcdef';
      const err = await fx.fs.open(fx.small.uri, { signal: signal(), range: { start: 1, end: 3 }, pin: { etag: stale } }).then(
        ({ stream }) => {
          stream.destroy();
          return new Error('open resolved');
        },
        (e: unknown) => e,
      );
      expectCode(err, 'GW_FETCH_CHANGED', fx.secrets);
    });

    /** Downloads the large object with `parallel` (pinned ranges); checks the file holds the bytes the in-order digest took. */
    const downloadLarge = async (parallel: ParallelSettings, clock?: Clock): Promise<DownloadResult> => {
      const st = await fx.fs.stat(fx.large.uri, signal());
      const dir = await mkdtemp(join(tmpdir(), 'contract-ranged-'));
      try {
        const file = join(dir, 'large.part');
        const r = await downloadTo(fx.fs, fx.large.uri, file, {
          signal: signal(),
          maxBytes: fx.large.size,
          onProgress: () => undefined,
          stat: st,
          parallel,
          ...(clock ? { clock } : {}),
        });
        const onDisk = createHash('sha256');
        for await (const c of createReadStream(file)) onDisk.update(c as Buffer);
        expect(onDisk.digest('hex')).toBe(fx.large.sha256);
        return r;
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    };

    (pinned ? it : it.skip)(
      'a parallel ranged download of the large object: pinned parts at their offsets, one in-order SHA-256',
      async () => {
        const r = await downloadLarge({ partSize: 4 * 1024 * 1024, concurrency: 4 });
        expect(r.parts).toBe(planParts(fx.large.size, { partSize: 4 * 1024 * 1024, concurrency: 4 }).length);
        expect(r.parts).toBeGreaterThan(1);
        expect({ size: r.size, sha256: r.sha256 }).toEqual({ size: fx.large.size, sha256: fx.large.sha256 });
      },
      120_000,
    );

    (pinned ? it : it.skip)(
      'a first ranged request fast enough alone: the object is read in one stream of two pinned ranges, one in-order SHA-256',
      async () => {
        // Time stands still: the first request delivers any number of bytes in no time.
        const r = await downloadLarge({ partSize: 4 * 1024 * 1024, concurrency: 4, loneStreamRate: 1024 ** 2 }, stillClock);
        expect({ parts: r.parts, atOnce: r.atOnce, size: r.size, sha256: r.sha256 }).toEqual({
          parts: 2,
          atOnce: 1,
          size: fx.large.size,
          sha256: fx.large.sha256,
        });
      },
      120_000,
    );
  });
}
