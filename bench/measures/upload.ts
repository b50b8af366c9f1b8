import type { BenchEnv } from '../lib/env';
import { deleteJar, jarIdOf } from '../lib/env';
import { childrenCpuSeconds, curl, processCpuSeconds } from '../lib/procs';
import { emit, judged, MiB, type RunPlan, round, sideBySide, summarize } from '../lib/report';

interface UploadRun {
  mibPerSec: number;
  /** CPU seconds per GiB moved: the gateway process, the JobManager's JVM, curl. */
  cpu: { gateway: number; jobManager: number; curl: number };
}

/**
 * curl -F of one jar to <base>/v1/jars/upload; MiB/s from curl's time_total; the jar is deleted
 * after (outside the CPU counts).
 */
async function curlUpload(base: string, deleteVia: string, path: string, size: number, pids: { gateway?: number; jobManager: number }): Promise<UploadRun> {
  const gib = size / 1024 ** 3;
  const before = { gateway: pids.gateway ? processCpuSeconds(pids.gateway) : 0, jobManager: processCpuSeconds(pids.jobManager), curl: childrenCpuSeconds() };
  const r = await curl(['-f', '-X', 'POST', '-H', 'Expect:', '-F', `jarfile=@${path}`, '-w', '\n%{time_total}', `${base}/v1/jars/upload`]);
  const cpu = {
    gateway: round((pids.gateway ? processCpuSeconds(pids.gateway) - before.gateway : 0) / gib),
    jobManager: round((processCpuSeconds(pids.jobManager) - before.jobManager) / gib),
    curl: round((childrenCpuSeconds() - before.curl) / gib),
  };
  const [body, secs] = r.stdout.trim().split('\n');
  await deleteJar(deleteVia, jarIdOf(JSON.parse(body!)));
  return { mibPerSec: size / MiB / Number(secs), cpu };
}

const medianOf = (runs: UploadRun[], key: keyof UploadRun['cpu']) => summarize(runs.map((r) => r.cpu[key])).median;

/** Measure 5: POST /jars/upload through the gateway (streamed, hashed, zip-checked) vs directly. */
export async function uploadThroughput(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const gw = await env.gateway('shared', 'shared-dir');
  const jar = await env.jar(plan.smoke ? 8 * MiB : 200 * MiB);
  const { gateway, anchor } = await sideBySide(
    plan,
    'upload',
    () => curlUpload(gw.url, flink.restUrl, jar.path, jar.size, { gateway: gw.pid, jobManager: flink.pid }),
    () => curlUpload(flink.restUrl, flink.restUrl, jar.path, jar.size, { jobManager: flink.pid }),
  );
  const g = summarize(gateway.map((r) => r.mibPerSec));
  const a = summarize(anchor.map((r) => r.mibPerSec));
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
    params: {
      bytes: jar.size,
      // Medians; the three processes share the machine's cores.
      cpuSecPerGiB: {
        gateway: { gateway: medianOf(gateway, 'gateway'), jobManager: medianOf(gateway, 'jobManager'), curl: medianOf(gateway, 'curl') },
        anchor: { jobManager: medianOf(anchor, 'jobManager'), curl: medianOf(anchor, 'curl') },
      },
      reps: plan.reps,
      warmups: plan.warmups,
    },
  });
}
