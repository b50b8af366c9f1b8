import { createHash } from 'node:crypto';
import { closeSync, createWriteStream, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { request } from 'undici';
import { httpPlugin } from '../fs-plugins/http';
import { WORDCOUNT_JAR } from '../test/helpers/flink';
import { writePaddedJar } from '../test/helpers/padded-jar';
import { BenchFetcher } from './lib/fetcher';
import { curl, killAllTracked, startChild, stopChild } from './lib/procs';
import { MiB, summarize } from './lib/report';

/**
 * A diagnostic for measure 1 (not part of `npm run bench`): fetches one object from the bench HTTP
 * origin with the gateway's fetcher and with simpler client pipelines, to show where the fetch
 * path's time goes. Run it under a profiler to see the fetcher's hot spots:
 *
 *   npx tsc -p bench/tsconfig.json && node --cpu-prof --cpu-prof-dir=.tmp/prof \
 *     .tmp/bench-build/bench/profile-fetch.js --mb=200 --reps=5 --variants=fetcher
 *
 * Variants: fetcher (ArtifactFetcher.fetch), download (the plugin's open + sha256 + file, i.e.
 * src/download/download.ts), undici-file (undici.request → file), undici-sha-file (+ a sha256
 * Transform), undici-passthrough-sha-file (+ the plugin's PassThrough), undici-fd (sha256 and
 * positional writes to a FileHandle, no Writable stream), undici-sha-writev-1m (chunks gathered to
 * 1 MiB, then one writev per batch: fewer thread-pool round trips), undici-sha-writesync (writeSync on
 * the main thread, as curl does: no thread-pool hop at all; blocks the event loop per chunk), curl
 * (`curl -o`, wall time of the process, for comparison in the same session; its CPU is not counted).
 */
const VARIANTS = [
  'fetcher',
  'download',
  'undici-file',
  'undici-sha-file',
  'undici-passthrough-sha-file',
  'undici-fd',
  'undici-sha-writev-1m',
  'undici-sha-writesync',
  'curl',
] as const;
type Variant = (typeof VARIANTS)[number];

function arg(name: string, def: string): string {
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
}

class Sha extends Transform {
  readonly h = createHash('sha256');
  constructor() {
    super({ highWaterMark: 1024 * 1024 });
  }
  override _transform(c: Buffer, _e: BufferEncoding, cb: (err: null, c: Buffer) => void): void {
    this.h.update(c);
    cb(null, c);
  }
}

async function main(): Promise<void> {
  const mb = Number(arg('mb', '200'));
  const reps = Number(arg('reps', '5'));
  const variants = arg('variants', VARIANTS.join(',')).split(',') as Variant[];
  const dir = mkdtempSync(join(tmpdir(), 'bench-profile-fetch-'));
  const root = join(__dirname, '..', '..', '..');
  const jarDir = join(dir, 'jars');
  await mkdir(jarDir);
  await writePaddedJar(WORDCOUNT_JAR, join(jarDir, 'big.jar'), mb * MiB);
  const origin = await startChild(process.execPath, [join(root, 'bench', 'servers', 'jar-origin.cjs'), jarDir], {
    ready: /JAR_ORIGIN_READY (\S+)/,
    timeoutMs: 15_000,
  });
  const url = `${origin.match[1]}/big.jar`;
  const fetcher = new BenchFetcher(dir, [httpPlugin], {
    'gateway.artifacts.allowed-schemes': 'http',
    'user.artifacts.raw-http-enabled': 'true',
    'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${new URL(url).port}`,
    'user.artifacts.max-size': '2 gb',
  });
  let n = 0;
  const once = async (v: Variant): Promise<number> => {
    const file = join(dir, `out-${n++}`);
    const t0 = performance.now();
    switch (v) {
      case 'fetcher':
        await fetcher.fetchOnce(url);
        break;
      case 'download':
        await fetcher.downloadOnce(url);
        break;
      case 'undici-file': {
        const res = await request(url);
        await pipeline(res.body, createWriteStream(file, { flags: 'wx' }));
        break;
      }
      case 'undici-sha-file': {
        const res = await request(url);
        await pipeline(res.body, new Sha(), createWriteStream(file, { flags: 'wx' }));
        break;
      }
      case 'undici-passthrough-sha-file': {
        const res = await request(url);
        const pt = new PassThrough({ highWaterMark: 64 * 1024 });
        res.body.pipe(pt);
        await pipeline(pt, new Sha(), createWriteStream(file, { flags: 'wx' }));
        break;
      }
      case 'undici-fd': {
        const res = await request(url);
        const fh = await open(file, 'wx');
        const h = createHash('sha256');
        let pos = 0;
        try {
          for await (const c of res.body as AsyncIterable<Buffer>) {
            h.update(c);
            await fh.write(c, 0, c.length, pos);
            pos += c.length;
          }
        } finally {
          await fh.close();
        }
        h.digest('hex');
        break;
      }
      case 'undici-sha-writev-1m': {
        const res = await request(url);
        const fh = await open(file, 'wx');
        const h = createHash('sha256');
        let batch: Buffer[] = [];
        let batchBytes = 0;
        try {
          for await (const c of res.body as AsyncIterable<Buffer>) {
            h.update(c);
            batch.push(c);
            batchBytes += c.length;
            if (batchBytes >= MiB) {
              await fh.writev(batch);
              batch = [];
              batchBytes = 0;
            }
          }
          if (batch.length) await fh.writev(batch);
        } finally {
          await fh.close();
        }
        h.digest('hex');
        break;
      }
      case 'curl':
        await curl(['-f', '-o', file, url]);
        break;
      case 'undici-sha-writesync': {
        const res = await request(url);
        const fd = openSync(file, 'wx');
        const h = createHash('sha256');
        try {
          for await (const c of res.body as AsyncIterable<Buffer>) {
            h.update(c);
            writeSync(fd, c);
          }
        } finally {
          closeSync(fd);
        }
        h.digest('hex');
        break;
      }
    }
    const ms = performance.now() - t0;
    rmSync(file, { force: true });
    return (mb * MiB) / MiB / (ms / 1000);
  };
  try {
    for (const v of variants) {
      await once(v); // warm-up
      const cpu0 = process.cpuUsage();
      const rates: number[] = [];
      for (let r = 0; r < reps; r++) rates.push(await once(v));
      const cpu = process.cpuUsage(cpu0);
      const s = summarize(rates);
      process.stdout.write(
        `${JSON.stringify({ variant: v, unit: 'MiB/s', min: s.min, median: s.median, max: s.max, clientCpuSecPerGiB: v === 'curl' ? null : Math.round(((cpu.user + cpu.system) / 1e6 / ((reps * mb) / 1024)) * 100) / 100 })}\n`,
      );
    }
  } finally {
    await fetcher.close();
    await stopChild(origin.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    killAllTracked();
    process.exit(1);
  },
);
