import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { azurePlugin } from '../../fs-plugins/azure';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import * as bulkModule from '../../src/download/bulk-http';
import { UndiciBulkClient } from '../lib/undici-slab-client';
import { startAzurite, uploadBlob } from '../../test/servers/azurite';
import { putObject, startS3Server } from '../../test/servers/s3-server';
import type { BenchEnv } from '../lib/env';
import { BenchFetcher } from '../lib/fetcher';
import { memoryOf, ownCpuSeconds, resetPeakRss, track } from '../lib/procs';
import { emit, judged, MiB, note, type RunPlan, round, summarize } from '../lib/report';

const GiB = 1024 * MiB;
const S3_KEY = { accessKeyId: 'AKIDENGINE', secretAccessKey: `engine-${randomBytes(12).toString('hex')}` };
const AZ = { name: 'engineacct', key: randomBytes(64).toString('base64') };

type Engine = 'bulk-http' | 'undici-slab';
const ENGINES: readonly Engine[] = ['bulk-http', 'undici-slab'];

/**
 * The fetchers of one engine. The plugins construct `BulkHttpClient` from the download folder when
 * they are created; for the undici side that name is bound to `UndiciBulkClient` while its
 * fetcher's plugins are created, so the plugins, the fetch path and the servers are the same and
 * only the client that reads the bodies differs.
 */
function fetcherFor(engine: Engine, env: BenchEnv, options: Record<string, string>): BenchFetcher {
  const mod = bulkModule as unknown as { BulkHttpClient: unknown };
  const original = mod.BulkHttpClient;
  if (engine === 'undici-slab') mod.BulkHttpClient = UndiciBulkClient;
  try {
    const f = new BenchFetcher(env.dir, [httpPlugin, s3Plugin, azurePlugin], options);
    // Create each plugin's file system now, while the binding holds.
    for (const scheme of ['http', 's3', 'wasbs']) f.plugins.fileSystemFor(scheme);
    return f;
  } finally {
    mod.BulkHttpClient = original;
  }
}

interface Sample {
  mibps: number;
  cpuPerGiB: number;
  /** Peak RSS during the fetch − RSS before it, per GiB moved. */
  rssGrowthPerGiB: number;
}

/**
 * The download-engine decision: the same objects fetched through the gateway's fetch path by the
 * bulk HTTP client and by undici's HTTP/1.1 client on slab-reading sockets, interleaved round by
 * round in one process (http, s3 and azure plugins), with CPU per GiB, MiB/s and RSS growth per
 * GiB moved. Prints one line per engine and store, then the decision table as one JSON object.
 */
export async function engineDecision(env: BenchEnv, plan: RunPlan): Promise<void> {
  const jar = await env.jar(plan.smoke ? 16 * MiB : 1024 * MiB);
  const origin = await env.origin();
  const [s3, azurite] = await Promise.all([
    startS3Server({ keys: { [S3_KEY.accessKeyId]: S3_KEY.secretAccessKey }, buckets: ['engine'] }),
    startAzurite({ accounts: [AZ] }),
  ]);
  track(s3.child);
  track(azurite.child);
  const options = {
    'gateway.artifacts.allowed-schemes': 'http;https;s3;wasbs',
    'user.artifacts.raw-http-enabled': 'true',
    'gateway.artifacts.restricted-hosts.allowed': [origin.port, s3.port, azurite.port].map((p) => `127.0.0.1:${p}`).join(';'),
    'user.artifacts.max-size': '2 gb',
    's3.endpoint': s3.url,
    's3.path.style.access': 'true',
    's3.access-key': S3_KEY.accessKeyId,
    's3.secret-key': S3_KEY.secretAccessKey,
    [`fs.azure.account.key.${AZ.name}.blob.core.windows.net`]: AZ.key,
    [`fs.azure.account.endpoint.${AZ.name}`]: azurite.blobUrl(AZ.name),
  };
  const fetchers = new Map(ENGINES.map((e) => [e, fetcherFor(e, env, options)] as const));
  try {
    await Promise.all([putObject(s3.url, S3_KEY, 'engine', jar.name, jar.path), uploadBlob(azurite, AZ, 'jars', jar.name, jar.path)]);
    const stores = [
      { store: 'http', uri: `${origin.url}/${jar.name}` },
      { store: 's3', uri: `s3://engine/${jar.name}` },
      { store: 'azure', uri: `wasbs://jars@${AZ.name}.blob.core.windows.net/${jar.name}` },
    ];
    const once = async (engine: Engine, uri: string): Promise<Sample> => {
      const fetcher = fetchers.get(engine)!;
      await sleep(200);
      const before = memoryOf(process.pid).rss;
      const hwmReset = resetPeakRss(process.pid);
      let sampled = before;
      const timer = setInterval(() => {
        sampled = Math.max(sampled, memoryOf(process.pid).rss);
      }, 10);
      const cpu0 = ownCpuSeconds();
      let r: Awaited<ReturnType<BenchFetcher['fetchOnce']>>;
      try {
        r = await fetcher.fetchOnce(uri);
      } finally {
        clearInterval(timer);
      }
      const cpu = ownCpuSeconds() - cpu0;
      if (r.sha256 !== jar.sha256) throw new Error(`${engine} ${uri}: wrong sha256`);
      const { rss, hwm } = memoryOf(process.pid);
      const peak = Math.max(hwmReset ? hwm : 0, sampled, rss);
      const gib = jar.size / GiB;
      return { mibps: jar.size / MiB / (r.ms / 1000), cpuPerGiB: cpu / gib, rssGrowthPerGiB: (peak - before) / MiB / gib };
    };
    const table: Record<string, unknown>[] = [];
    for (const { store, uri } of stores) {
      const samples = new Map<Engine, Sample[]>(ENGINES.map((e) => [e, []]));
      for (let round_ = 0; round_ < plan.warmups + plan.reps; round_++) {
        // Alternate which engine goes first, so that drift over the round favours neither.
        const order = round_ % 2 === 0 ? ENGINES : [...ENGINES].reverse();
        for (const engine of order) {
          const s = await once(engine, uri);
          if (round_ >= plan.warmups) samples.get(engine)!.push(s);
          note(
            `engine.${store} ${engine} round ${round_ + 1}: ${round(s.mibps, 0)} MiB/s, ${round(s.cpuPerGiB, 2)} CPU-s/GiB, RSS +${round(s.rssGrowthPerGiB, 1)} MiB/GiB`,
          );
        }
      }
      const per = Object.fromEntries(
        ENGINES.map((e) => {
          const xs = samples.get(e)!;
          return [
            e,
            {
              mibps: summarize(xs.map((x) => x.mibps)),
              cpuSecPerGiB: summarize(xs.map((x) => x.cpuPerGiB)),
              rssGrowthMiBPerGiB: summarize(xs.map((x) => x.rssGrowthPerGiB)),
            },
          ];
        }),
      ) as unknown as Record<
        Engine,
        { mibps: { median: number }; cpuSecPerGiB: { median: number }; rssGrowthMiBPerGiB: { median: number; max: number } }
      >;
      const b = per['bulk-http'];
      const u = per['undici-slab'];
      const cpuRatio = round(u.cpuSecPerGiB.median / b.cpuSecPerGiB.median);
      const mibpsRatio = round(u.mibps.median / b.mibps.median);
      const within = cpuRatio <= 1.1 && mibpsRatio >= 0.9;
      const row = {
        store,
        bulkHttp: {
          mibps: round(b.mibps.median, 0),
          cpuSecPerGiB: round(b.cpuSecPerGiB.median, 2),
          rssGrowthMiBPerGiBWorst: round(b.rssGrowthMiBPerGiB.max, 1),
        },
        undiciSlab: {
          mibps: round(u.mibps.median, 0),
          cpuSecPerGiB: round(u.cpuSecPerGiB.median, 2),
          rssGrowthMiBPerGiBWorst: round(u.rssGrowthMiBPerGiB.max, 1),
        },
        undiciOverBulkCpu: cpuRatio,
        undiciOverBulkMiBps: mibpsRatio,
        within10Percent: judged(plan, true, within),
      };
      table.push(row);
      emit({
        name: `engine.${store}`,
        unit: 'MiB/s',
        gateway: summarize(samples.get('undici-slab')!.map((x) => x.mibps)),
        anchor: summarize(samples.get('bulk-http')!.map((x) => x.mibps)),
        ratio: mibpsRatio,
        ratioIs: 'undici-slab / bulk-http (throughput, medians; higher is better)',
        target: '≥ 0.9× bulk-http throughput and ≤ 1.1× its CPU per GiB',
        met: judged(plan, true, within),
        smoke: plan.smoke,
        params: {
          bytes: jar.size,
          per,
          cpuRatio,
          memoryTarget: '≤ 64 MiB RSS growth per GiB moved',
          memoryMet: judged(plan, true, b.rssGrowthMiBPerGiB.max <= 64 && u.rssGrowthMiBPerGiB.max <= 64),
          reps: plan.reps,
          warmups: plan.warmups,
        },
      });
    }
    const allWithin = table.every((r) => r.within10Percent === true);
    const cpuRatios = table.map((r) => r.undiciOverBulkCpu as number);
    emit({
      name: 'engine.decision',
      unit: 'ratio',
      gateway: summarize(cpuRatios),
      anchor: null,
      ratio: round(Math.max(...cpuRatios)),
      ratioIs:
        "undici-slab / bulk-http CPU per GiB, per store (gateway: over the stores; ratio: the worst); params.table is this run's engine.* lines",
      target: 'undici within 10 % of bulk-http (CPU per GiB and MiB/s) on every store → one engine (undici)',
      met: judged(plan, true, allWithin),
      smoke: plan.smoke,
      params: {
        table,
        verdict: allWithin
          ? 'undici-slab is within 10 %: bulk-http can go'
          : 'bulk-http stays: undici-slab is not within 10 % on every store',
        v8Tuning: process.env.BENCH_V8_TUNING === 'off' ? 'off' : 'on',
        reps: plan.reps,
        warmups: plan.warmups,
      },
    });
  } finally {
    await Promise.all([...fetchers.values()].map((f) => f.close()));
    await Promise.all([s3.stop(), azurite.stop()]);
  }
}
