import type { BenchEnv } from '../lib/env';
import { deleteJar, jarIdOf } from '../lib/env';
import { curl } from '../lib/procs';
import { emit, judged, MiB, type RunPlan, round, sideBySide, summarize } from '../lib/report';

/** curl -F of one jar to <base>/v1/jars/upload; MiB/s from curl's time_total; the jar is deleted after. */
async function curlUpload(base: string, deleteVia: string, path: string, size: number): Promise<number> {
  const r = await curl(['-f', '-X', 'POST', '-H', 'Expect:', '-F', `jarfile=@${path}`, '-w', '\n%{time_total}', `${base}/v1/jars/upload`]);
  const [body, secs] = r.stdout.trim().split('\n');
  await deleteJar(deleteVia, jarIdOf(JSON.parse(body!)));
  return size / MiB / Number(secs);
}

/** Measure 5: POST /jars/upload through the gateway (streamed, hashed, zip-checked) vs directly. */
export async function uploadThroughput(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const gw = await env.gateway('shared', 'shared-dir');
  const jar = await env.jar(plan.smoke ? 8 * MiB : 200 * MiB);
  const { gateway, anchor } = await sideBySide(
    plan,
    'upload',
    () => curlUpload(gw.url, flink.restUrl, jar.path, jar.size),
    () => curlUpload(flink.restUrl, flink.restUrl, jar.path, jar.size),
  );
  const g = summarize(gateway);
  const a = summarize(anchor);
  const ratio = round(g.median / a.median);
  emit({
    name: 'upload.200MB',
    unit: 'MiB/s',
    gateway: g,
    anchor: a,
    ratio,
    ratioIs: 'gateway/anchor (throughput; higher is better); both sides: curl -F jarfile=@<jar> …/v1/jars/upload',
    target: '≥ 0.9× direct',
    met: judged(plan, true, ratio >= 0.9),
    smoke: plan.smoke,
    params: { bytes: jar.size, reps: plan.reps, warmups: plan.warmups },
  });
}
