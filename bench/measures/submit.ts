import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { newJobId } from '../../test/helpers/flink';
import { type BenchEnv, type BenchJar, deleteJar, type Flink, jarIdOf, runJar, settle, uploadPlaceholder } from '../lib/env';
import { curl, type GatewayProcess } from '../lib/procs';
import { emit, judged, MiB, note, type RunPlan, round, summarize } from '../lib/report';

export interface Timed {
  ms: number;
  phases: Record<string, number>;
}

/** The operator's two-hop path: curl the jar down, curl -F it to the JobManager, run, delete. */
async function twoHop(env: BenchEnv, flink: Flink, url: string, jar: BenchJar): Promise<Timed> {
  const file = env.scratch('operator-jar');
  const jobId = newJobId();
  try {
    const down = await curl(['-f', '-o', file, '-w', '%{time_total}', url]);
    const up = await curl([
      '-f',
      '-X',
      'POST',
      '-H',
      'Expect:',
      '-F',
      `jarfile=@${file};filename=${jar.name}`,
      '-w',
      '\n%{time_total}',
      `${flink.restUrl}/v1/jars/upload`,
    ]);
    const [body, upSecs] = up.stdout.trim().split('\n');
    const jarId = jarIdOf(JSON.parse(body!));
    const t0 = performance.now();
    await runJar(flink.restUrl, jarId, jobId);
    const t1 = performance.now();
    await deleteJar(flink.restUrl, jarId);
    const t2 = performance.now();
    const phases = { download: Number(down.stdout) * 1000, upload: Number(upSecs) * 1000, run: t1 - t0, delete: t2 - t1 };
    return { ms: Object.values(phases).reduce((a, b) => a + b, 0), phases };
  } finally {
    rmSync(file, { force: true });
    await settle(flink, jobId);
  }
}

const logTime = (l: Record<string, unknown>) => Date.parse(String(l.time));

/**
 * The gateway path as the operator drives it: upload a placeholder jar, run it with
 * `user.artifacts.job-jar: <uri>` (the gateway fetches, hands off, runs, deletes the transient jar),
 * delete the placeholder. The phases inside the run come from the gateway's own log lines.
 */
export async function byUri(flink: Flink, gw: GatewayProcess, uri: string): Promise<Timed> {
  const jobId = newJobId();
  try {
    const t0 = performance.now();
    const placeholder = await uploadPlaceholder(gw.url);
    const t1 = performance.now();
    const runStart = Date.now();
    await runJar(gw.url, placeholder, jobId, { 'user.artifacts.job-jar': uri });
    const runEnd = Date.now();
    const t2 = performance.now();
    await deleteJar(gw.url, placeholder);
    const t3 = performance.now();
    const mine = gw.logs.filter((l) => l.jobId === jobId);
    const fetched = mine.find((l) => l.msg === 'jar fetched');
    const handed = mine.find((l) => l.msg === 'remote jar handed to the JobManager');
    const submitted = mine.find((l) => l.msg === 'job submitted');
    const phases: Record<string, number> = { placeholderUpload: t1 - t0 };
    if (fetched && handed && submitted) {
      const fetchMs = Number(fetched.ms);
      phases.beforeFetch = logTime(fetched) - fetchMs - runStart;
      phases.fetch = fetchMs;
      phases.handoff = logTime(handed) - logTime(fetched);
      phases.jobManagerRun = logTime(submitted) - logTime(handed);
      phases.releaseAndRespond = runEnd - logTime(submitted);
    } else {
      phases.run = t2 - t1;
    }
    phases.placeholderDelete = t3 - t2;
    return { ms: t3 - t0, phases };
  } finally {
    await settle(flink, jobId);
  }
}

export function medianPhases(runs: Timed[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of Object.keys(runs[0]?.phases ?? {})) {
    out[key] = summarize(runs.map((r) => r.phases[key] ?? Number.NaN)).median;
  }
  return out;
}

/**
 * Measure 2: time from request to jobid, gateway by URI (shared-dir and upload hand-off) vs the
 * operator's two-hop path, on the same embedded Flink, for two jar sizes. The three sides take
 * turns within each round, in a rotating order.
 */
export async function submitLatency(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const origin = await env.origin();
  const [shared, upload] = await Promise.all([env.gateway('shared', 'shared-dir'), env.gateway('upload', 'upload')]);
  const sizes = plan.smoke
    ? [
        { label: '50MB', pad: 4 * MiB },
        { label: '200MB', pad: 8 * MiB },
      ]
    : [
        { label: '50MB', pad: 50 * MiB },
        { label: '200MB', pad: 200 * MiB },
      ];
  for (const { label, pad } of sizes) {
    const jar = await env.jar(pad);
    const sides: { key: 'anchor' | 'shared-dir' | 'upload'; run: (r: number) => Promise<Timed> }[] = [
      { key: 'anchor', run: () => twoHop(env, flink, `${origin.url}/${jar.name}`, jar) },
      // A new URI each time: a cache miss, so every run fetches.
      {
        key: 'shared-dir',
        run: (r) => byUri(flink, shared, `${origin.url}/submit-shared/${r}-${randomBytes(4).toString('hex')}/${jar.name}`),
      },
      { key: 'upload', run: (r) => byUri(flink, upload, `${origin.url}/submit-upload/${r}-${randomBytes(4).toString('hex')}/${jar.name}`) },
    ];
    const results: Record<string, Timed[]> = { anchor: [], 'shared-dir': [], upload: [] };
    for (let r = 0; r < plan.warmups + plan.reps; r++) {
      for (let i = 0; i < sides.length; i++) {
        const side = sides[(i + r) % sides.length]!;
        const t = await side.run(r);
        if (r >= plan.warmups) results[side.key]!.push(t);
      }
      note(`submit ${label}: ${r < plan.warmups ? 'warm-up' : `rep ${r - plan.warmups + 1}/${plan.reps}`} done`);
    }
    const a = summarize(results.anchor!.map((t) => t.ms));
    for (const mode of ['shared-dir', 'upload'] as const) {
      const g = summarize(results[mode]!.map((t) => t.ms));
      const ratio = round(g.median / a.median);
      const limit = label === '200MB' ? (mode === 'shared-dir' ? 0.6 : 0.8) : undefined;
      emit({
        name: `submit.${mode}.${label}`,
        unit: 'ms',
        gateway: g,
        anchor: a,
        ratio,
        ratioIs: 'gateway/anchor (time; lower is better); anchor = curl download + curl -F upload to the JobManager + run + delete',
        target: limit !== undefined ? `≤ ${limit}× the two-hop path` : null,
        met: judged(plan, limit !== undefined, limit !== undefined && ratio <= limit),
        smoke: plan.smoke,
        params: {
          bytes: jar.size,
          handoff: mode,
          breakdownMs: { gateway: medianPhases(results[mode]!), anchor: medianPhases(results.anchor!) },
          reps: plan.reps,
          warmups: plan.warmups,
        },
      });
    }
  }
}

/**
 * Measure 3: an unchanged resubmission by URI with the shared-dir hand-off (the cache revalidates
 * with a HEAD, hard-links, runs) vs running an already uploaded jar id directly on the JobManager.
 * Object bytes are counted at the origin.
 */
export async function resubmit(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const origin = await env.origin();
  const gw = await env.gateway('shared', 'shared-dir');
  const jar = await env.jar(plan.smoke ? 8 * MiB : 200 * MiB);
  const uri = `${origin.url}/resubmit/${jar.name}`;
  const placeholder = await uploadPlaceholder(gw.url);
  const up = await curl(['-f', '-X', 'POST', '-H', 'Expect:', '-F', `jarfile=@${jar.path}`, `${flink.restUrl}/v1/jars/upload`]);
  const directJarId = jarIdOf(JSON.parse(up.stdout));
  try {
    // The first submission fetches; everything measured below is a resubmission.
    const primeJob = newJobId();
    await runJar(gw.url, placeholder, primeJob, { 'user.artifacts.job-jar': uri });
    await settle(flink, primeJob);
    const gatewayRuns: { ms: number; bytes: number }[] = [];
    const anchorRuns: number[] = [];
    for (let r = 0; r < plan.warmups + plan.reps; r++) {
      const order = r % 2 === 0 ? ['anchor', 'gateway'] : ['gateway', 'anchor'];
      for (const side of order) {
        const jobId = newJobId();
        if (side === 'gateway') {
          const before = await origin.bytesSent();
          const t0 = performance.now();
          await runJar(gw.url, placeholder, jobId, { 'user.artifacts.job-jar': uri });
          const ms = performance.now() - t0;
          const bytes = (await origin.bytesSent()) - before;
          if (r >= plan.warmups) gatewayRuns.push({ ms, bytes });
        } else {
          const t0 = performance.now();
          await runJar(flink.restUrl, directJarId, jobId);
          if (r >= plan.warmups) anchorRuns.push(performance.now() - t0);
        }
        await settle(flink, jobId);
      }
      note(`resubmit: ${r < plan.warmups ? 'warm-up' : `rep ${r - plan.warmups + 1}/${plan.reps}`} done`);
    }
    const bytes = summarize(gatewayRuns.map((g) => g.bytes));
    emit({
      name: 'resubmit.bytes',
      unit: 'bytes',
      gateway: bytes,
      anchor: summarize(anchorRuns.map(() => 0)),
      ratio: null,
      ratioIs: 'n/a (absolute target); anchor = a run of an uploaded jar id moves no object bytes',
      target: '0 object bytes per unchanged resubmission (counted at the origin)',
      met: judged(plan, true, bytes.max === 0),
      smoke: plan.smoke,
      params: { jarBytes: jar.size, handoff: 'shared-dir', reps: plan.reps, warmups: plan.warmups },
    });
    const g = summarize(gatewayRuns.map((x) => x.ms));
    const a = summarize(anchorRuns);
    const ratio = round(g.median / a.median);
    emit({
      name: 'resubmit.time',
      unit: 'ms',
      gateway: g,
      anchor: a,
      ratio,
      ratioIs:
        'gateway/anchor (time; lower is better); gateway = run by URI (cached) through the gateway, anchor = run of an uploaded jar id on the JobManager',
      target: '≤ 1.1× a direct run of an uploaded jar id',
      met: judged(plan, true, ratio <= 1.1),
      smoke: plan.smoke,
      params: { jarBytes: jar.size, handoff: 'shared-dir', addedMs: round(g.median - a.median), reps: plan.reps, warmups: plan.warmups },
    });
  } finally {
    await deleteJar(gw.url, placeholder).catch(() => undefined);
    await deleteJar(flink.restUrl, directJarId).catch(() => undefined);
  }
}
