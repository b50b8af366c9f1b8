import { randomBytes } from 'node:crypto';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { artifactOptions } from '../../src/artifacts/options';
import { WORDCOUNT_CLASS } from '../../test/helpers/flink';
import { buildJavaClient } from '../../test/helpers/java-client';
import { putObject, startS3Server } from '../../test/servers/s3-server';
import type { BenchEnv } from '../lib/env';
import { BenchFetcher } from '../lib/fetcher';
import { childrenCpuSeconds, ownCpuSeconds, processCpuSeconds, runCommand, startChild, stopChild, track } from '../lib/procs';
import { emit, judged, MiB, note, type RunPlan, round, selected, sideBySide, summarize } from '../lib/report';
import { byUri, medianPhases, type Timed } from './submit';

const GiB = 1024 * MiB;
/** The registry's default gateway.artifacts.parallel-fetch.concurrency: the headline figure. */
const DEFAULT_CONCURRENCY: number = artifactOptions.parallelFetchConcurrency.default ?? 1;
const S3_KEY = { accessKeyId: 'AKIDBENCHLINK', secretAccessKey: `bench-${randomBytes(12).toString('hex')}` };

/**
 * The simulated link: per-connection cap and round-trip time (BENCH_LINK=<MiB/s>:<rtt ms>). The
 * default 16 MiB/s keeps 8 connections within what two cores can carry with the origin, the proxy
 * and the gateway on them: a faster cap measures the machine's limit, not the link's (RESULTS.md).
 */
function linkParams(): { capMiBps: number; rttMs: number } {
  const [cap, rtt] = (process.env.BENCH_LINK ?? '16:10').split(':').map(Number);
  return { capMiBps: cap!, rttMs: rtt! };
}

interface Sample {
  mibps: number;
  cpuPerGiB: number;
  proxyCpuPerGiB: number;
}

/** The project's virtualenv (scripts/test-setup.sh installs test/servers/requirements.txt into it). */
function venvBin(root: string, name: string): string | undefined {
  const p = join(root, '.tmp', 'venv', 'bin', name);
  return existsSync(p) ? p : undefined;
}

/**
 * Measure 7: a realistic link, as a simulation. A throttling proxy
 * (bench/servers/throttle-proxy.cjs, its own process) in front of the HTTP origin and of the S3
 * server caps each connection at `capMiBps` and adds `rttMs` of round trip. The gateway's fetcher
 * with one stream and with parallel ranged reads, against curl (one stream) on the HTTP origin and
 * the AWS CLI (`aws s3 cp`, its default 10 concurrent requests) and s5cmd (if installed) on S3.
 * Every side goes through the same proxy; the proxy's CPU per GiB is reported for each.
 */
export async function linkThroughput(env: BenchEnv, plan: RunPlan): Promise<void> {
  const { capMiBps, rttMs } = linkParams();
  const jar = await env.jar(plan.smoke ? 8 * MiB : 200 * MiB);
  const size = jar.size;
  const origin = await env.origin();
  const s3 = await startS3Server({ keys: { [S3_KEY.accessKeyId]: S3_KEY.secretAccessKey }, buckets: ['bench'] });
  track(s3.child);
  const proxies: { child: import('node:child_process').ChildProcess; port: number }[] = [];
  const proxy = async (port: number) => {
    const p = await startChild(
      process.execPath,
      [join(env.root, 'bench', 'servers', 'throttle-proxy.cjs'), `127.0.0.1:${port}`, String(capMiBps * MiB), String(rttMs)],
      { ready: /THROTTLE_PROXY_READY (\d+)/, timeoutMs: 15_000 },
    );
    const out = { child: p.child, port: Number(p.match[1]) };
    proxies.push(out);
    return out;
  };
  const fetchers: BenchFetcher[] = [];
  try {
    await putObject(s3.url, S3_KEY, 'bench', jar.name, jar.path);
    const [httpProxy, s3Proxy] = await Promise.all([proxy(origin.port), proxy(s3.port)]);
    const s3ProxyUrl = `http://127.0.0.1:${s3Proxy.port}`;
    const concurrencies = [...new Set(plan.smoke ? [1, DEFAULT_CONCURRENCY] : [1, 4, 8, DEFAULT_CONCURRENCY])].sort((a, b) => a - b);
    const fetcherFor = (concurrency: number) => {
      const f = new BenchFetcher(env.dir, [httpPlugin, s3Plugin], {
        'gateway.artifacts.allowed-schemes': 'http;s3',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': [httpProxy.port, s3Proxy.port].map((p) => `127.0.0.1:${p}`).join(';'),
        'user.artifacts.max-size': '2 gb',
        'gateway.artifacts.parallel-fetch.concurrency': String(concurrency),
        ...(process.env.BENCH_LINK_PART_SIZE ? { 'gateway.artifacts.parallel-fetch.part-size': process.env.BENCH_LINK_PART_SIZE } : {}),
        's3.endpoint': s3ProxyUrl,
        's3.path.style.access': 'true',
        's3.access-key': S3_KEY.accessKeyId,
        's3.secret-key': S3_KEY.secretAccessKey,
      });
      fetchers.push(f);
      return f;
    };
    const gatewaySide = (f: BenchFetcher, uri: string, proxyPid: number, sha256?: string) => async (): Promise<Sample> => {
      const cpu0 = ownCpuSeconds();
      const p0 = processCpuSeconds(proxyPid);
      const r = await f.fetchOnce(uri, sha256);
      if (r.sha256 !== jar.sha256) throw new Error(`${uri}: wrong sha256`);
      return {
        mibps: size / MiB / (r.ms / 1000),
        cpuPerGiB: (ownCpuSeconds() - cpu0) / (size / GiB),
        proxyCpuPerGiB: (processCpuSeconds(proxyPid) - p0) / (size / GiB),
      };
    };
    const commandSide =
      (cmd: string, args: (file: string) => string[], proxyPid: number, envVars: NodeJS.ProcessEnv = {}) =>
      async (): Promise<Sample> => {
        const file = env.scratch('link-out');
        try {
          const c0 = childrenCpuSeconds();
          const p0 = processCpuSeconds(proxyPid);
          const saved = { ...process.env };
          Object.assign(process.env, envVars);
          let r: Awaited<ReturnType<typeof runCommand>>;
          try {
            r = await runCommand(cmd, args(file), 300_000);
          } finally {
            for (const k of Object.keys(envVars)) if (saved[k] === undefined) delete process.env[k];
            Object.assign(process.env, saved);
          }
          if (r.status !== 0) throw new Error(`${cmd} failed (${r.status}): ${r.stderr.trim().slice(0, 500)}`);
          return {
            mibps: size / MiB / (r.ms / 1000),
            cpuPerGiB: (childrenCpuSeconds() - c0) / (size / GiB),
            proxyCpuPerGiB: (processCpuSeconds(proxyPid) - p0) / (size / GiB),
          };
        } finally {
          rmSync(file, { force: true });
        }
      };
    const summaries = (xs: Sample[]) => ({
      mibps: summarize(xs.map((x) => x.mibps)),
      cpuSecPerGiB: summarize(xs.map((x) => x.cpuPerGiB)),
      proxyCpuSecPerGiB: summarize(xs.map((x) => x.proxyCpuPerGiB)),
    });

    // HTTP: the gateway (1, 4, 8 streams) against curl's one stream.
    if (selected(plan, 'fetch.link.http')) {
      const uri = `http://127.0.0.1:${httpProxy.port}/${jar.name}`;
      const anchor = commandSide('curl', (file) => ['-sSf', '-o', file, uri], httpProxy.child.pid!);
      const byConcurrency: Record<string, ReturnType<typeof summaries>> = {};
      let curlSamples: Sample[] = [];
      for (const n of concurrencies) {
        // curl (one stream at the cap, the slowest side) takes turns with the default only.
        const { gateway, anchor: a } = await sideBySide(
          plan,
          `fetch.link.http ×${n}`,
          gatewaySide(fetcherFor(n), uri, httpProxy.child.pid!),
          n === DEFAULT_CONCURRENCY ? anchor : async () => undefined,
        );
        byConcurrency[String(n)] = summaries(gateway);
        if (n === DEFAULT_CONCURRENCY) curlSamples = a as Sample[];
      }
      const best = String(DEFAULT_CONCURRENCY);
      const g = byConcurrency[best]!;
      const c = summaries(curlSamples);
      const limit = Number(best) * capMiBps;
      emit({
        name: 'fetch.link.http',
        unit: 'MiB/s',
        gateway: g.mibps,
        anchor: c.mibps,
        ratio: round(g.mibps.median / c.mibps.median),
        ratioIs: `gateway (${best} ranged requests, the default) / curl (one stream); higher is better`,
        target: `≥ 0.9× ${best} × the per-connection cap (${limit} MiB/s)`,
        met: judged(plan, true, g.mibps.median >= 0.9 * limit),
        smoke: plan.smoke,
        params: {
          bytes: size,
          link: { capMiBpsPerConnection: capMiBps, rttMs, simulation: 'bench/servers/throttle-proxy.cjs' },
          gatewayByConcurrency: byConcurrency,
          curl: c,
          reps: plan.reps,
          warmups: plan.warmups,
        },
      });
    }

    // S3: the gateway against the AWS CLI and s5cmd, all through the proxy in front of the S3 server.
    if (selected(plan, 'fetch.link.s3')) {
      const aws = venvBin(env.root, 'aws');
      const s5cmd = venvBin(env.root, 's5cmd');
      const uri = `s3://bench/${jar.name}`;
      const cfg = join(env.dir, 'aws-config');
      writeFileSync(cfg, '[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n');
      const awsEnv = {
        AWS_ACCESS_KEY_ID: S3_KEY.accessKeyId,
        AWS_SECRET_ACCESS_KEY: S3_KEY.secretAccessKey,
        AWS_CONFIG_FILE: cfg,
        AWS_SHARED_CREDENTIALS_FILE: join(env.dir, 'no-credentials'),
        AWS_DEFAULT_REGION: 'us-east-1',
      };
      const byConcurrency: Record<string, ReturnType<typeof summaries>> = {};
      const anchors: Record<string, ReturnType<typeof summaries>> = {};
      const gwDefault = fetcherFor(DEFAULT_CONCURRENCY);
      let gwSamples: Sample[] = [];
      if (aws) {
        const { gateway, anchor } = await sideBySide(
          plan,
          'fetch.link.s3 vs aws s3 cp',
          gatewaySide(gwDefault, uri, s3Proxy.child.pid!),
          commandSide(
            aws,
            (file) => ['s3', 'cp', '--only-show-errors', '--endpoint-url', s3ProxyUrl, uri, file],
            s3Proxy.child.pid!,
            awsEnv,
          ),
        );
        gwSamples = gwSamples.concat(gateway);
        anchors.awsCli = summaries(anchor);
      } else {
        note('fetch.link.s3: no aws in .tmp/venv (scripts/test-setup.sh installs awscli); the AWS CLI anchor is left out');
      }
      if (s5cmd) {
        const { gateway, anchor } = await sideBySide(
          plan,
          'fetch.link.s3 vs s5cmd',
          gatewaySide(gwDefault, uri, s3Proxy.child.pid!),
          commandSide(s5cmd, (file) => ['--endpoint-url', s3ProxyUrl, 'cp', uri, file], s3Proxy.child.pid!, awsEnv),
        );
        gwSamples = gwSamples.concat(gateway);
        anchors.s5cmd = summaries(anchor);
      } else {
        note('fetch.link.s3: no s5cmd in .tmp/venv; that anchor is left out');
      }
      if (gwSamples.length === 0)
        gwSamples = (
          await sideBySide(
            plan,
            `fetch.link.s3 ×${DEFAULT_CONCURRENCY}`,
            gatewaySide(gwDefault, uri, s3Proxy.child.pid!),
            async () => undefined,
          )
        ).gateway;
      byConcurrency[String(DEFAULT_CONCURRENCY)] = summaries(gwSamples);
      for (const n of concurrencies.filter((x) => x !== DEFAULT_CONCURRENCY)) {
        const { gateway } = await sideBySide(
          plan,
          `fetch.link.s3 ×${n}`,
          gatewaySide(fetcherFor(n), uri, s3Proxy.child.pid!),
          async () => undefined,
        );
        byConcurrency[String(n)] = summaries(gateway);
      }
      // Pinned to the jar's SHA-256: the store's MD5 is not computed (ADR 0017). Information.
      const pinned = summaries(
        (
          await sideBySide(
            plan,
            `fetch.link.s3 ×${DEFAULT_CONCURRENCY} pinned`,
            gatewaySide(gwDefault, uri, s3Proxy.child.pid!, jar.sha256),
            async () => undefined,
          )
        ).gateway,
      );
      const g = byConcurrency[String(DEFAULT_CONCURRENCY)]!;
      const a = anchors.awsCli ?? anchors.s5cmd;
      emit({
        name: 'fetch.link.s3',
        unit: 'MiB/s',
        gateway: g.mibps,
        anchor: a?.mibps ?? null,
        ratio: a ? round(g.mibps.median / a.mibps.median) : null,
        ratioIs: `gateway (${DEFAULT_CONCURRENCY} ranged requests, the default) / ${anchors.awsCli ? 'aws s3 cp (its default 10 requests)' : 's5cmd'}; higher is better`,
        target: `≥ 1.0× the AWS CLI, ≥ 0.9× s5cmd, ≥ 0.9× ${DEFAULT_CONCURRENCY} × the per-connection cap`,
        met: judged(
          plan,
          a !== undefined,
          (anchors.awsCli === undefined || g.mibps.median >= anchors.awsCli.mibps.median) &&
            (anchors.s5cmd === undefined || g.mibps.median >= 0.9 * anchors.s5cmd.mibps.median) &&
            g.mibps.median >= 0.9 * DEFAULT_CONCURRENCY * capMiBps,
        ),
        smoke: plan.smoke,
        params: {
          bytes: size,
          link: { capMiBpsPerConnection: capMiBps, rttMs, simulation: 'bench/servers/throttle-proxy.cjs' },
          gatewayByConcurrency: byConcurrency,
          gatewayPinned: {
            ...pinned,
            vsCap: round(pinned.mibps.median / (DEFAULT_CONCURRENCY * capMiBps)),
            is: `${DEFAULT_CONCURRENCY} ranged requests, pinned SHA-256 (no store MD5)`,
          },
          anchors,
          reps: plan.reps,
          warmups: plan.warmups,
        },
      });
    }

    // Time to jobid on the link: the gateway by URI (each hand-off) against the operator's Java two-hop.
    if (selected(plan, 'submit.link')) await submitOnLink(env, plan, `http://127.0.0.1:${httpProxy.port}`, jar, { capMiBps, rttMs });
  } finally {
    for (const f of fetchers) await f.close();
    for (const p of proxies) await stopChild(p.child);
    await s3.stop();
  }
}

/**
 * Time from request to jobid for a 200 MB jar behind the simulated link. Gateway: the operator's
 * calls by URI (placeholder upload, run with `user.artifacts.job-jar`, placeholder delete; a new
 * URI each run, so every run fetches), with the shared-dir and the upload hand-off. Anchor: the
 * operator's two-hop in Java (test/java-client TwoHop: download with Java through the same link,
 * upload with Flink's RestClient, run, delete), timed inside one warm JVM.
 */
async function submitOnLink(
  env: BenchEnv,
  plan: RunPlan,
  proxyUrl: string,
  jar: { name: string; size: number },
  link: { capMiBps: number; rttMs: number },
): Promise<void> {
  const flink = await env.flink();
  const allowed = { 'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${(await env.origin()).port};${new URL(proxyUrl).host}` };
  const [shared, upload] = await Promise.all([
    env.gateway('link-shared', 'shared-dir', allowed),
    env.gateway('link-upload', 'upload', allowed),
  ]);
  const dir = buildJavaClient('2.1');
  note('submit.link: Java two-hop starting');
  const java = await runCommand(
    'java',
    [
      '-cp',
      `${dir}/compat.jar:${dir}/lib/*`,
      'dev.flinkjargateway.compat.TwoHop',
      '--url',
      flink.restUrl,
      '--jar-url',
      `${proxyUrl}/${jar.name}`,
      '--entry-class',
      WORDCOUNT_CLASS,
      '--warmups',
      String(plan.warmups),
      '--reps',
      String(plan.reps),
    ],
    900_000,
  );
  if (java.status !== 0) throw new Error(`TwoHop failed (${java.status}): ${java.stderr.trim().slice(-1000)}`);
  const runs = (JSON.parse(java.stdout) as { runs: Record<string, number>[] }).runs;
  const anchorRuns: Timed[] = runs.map((r) => ({
    ms: r.totalMs!,
    phases: { download: r.downloadMs!, upload: r.uploadMs!, run: r.runMs!, delete: r.deleteMs! },
  }));
  const a = summarize(anchorRuns.map((r) => r.ms));
  for (const [mode, gw] of [
    ['shared-dir', shared],
    ['upload', upload],
  ] as const) {
    const results: Timed[] = [];
    for (let r = 0; r < plan.warmups + plan.reps; r++) {
      const t = await byUri(flink, gw, `${proxyUrl}/link-${mode}/${r}-${randomBytes(4).toString('hex')}/${jar.name}`);
      if (r >= plan.warmups) results.push(t);
    }
    note(`submit.link ${mode} done`);
    const g = summarize(results.map((t) => t.ms));
    const ratio = round(g.median / a.median);
    emit({
      name: `submit.link.${mode}.200MB`,
      unit: 'ms',
      gateway: g,
      anchor: a,
      ratio,
      ratioIs:
        'gateway/anchor (time; lower is better); anchor = the operator two-hop in Java: download through the link, upload with Flink RestClient, run, delete',
      target: '≤ 0.4× the Java two-hop',
      met: judged(plan, true, ratio <= 0.4),
      smoke: plan.smoke,
      params: {
        bytes: jar.size,
        handoff: mode,
        link: { capMiBpsPerConnection: link.capMiBps, rttMs: link.rttMs, simulation: 'bench/servers/throttle-proxy.cjs' },
        breakdownMs: { gateway: medianPhases(results), anchor: medianPhases(anchorRuns) },
        reps: plan.reps,
        warmups: plan.warmups,
      },
    });
  }
}
