import type { BenchEnv } from '../lib/env';
import { deleteJar, jarIdOf } from '../lib/env';
import { childrenCpuSeconds, curl, processCpuSeconds, threadCpuSeconds } from '../lib/procs';
import { emit, judged, MiB, type RunPlan, round, sideBySide, summarize } from '../lib/report';

interface UploadRun {
  mibPerSec: number;
  /** CPU seconds per GiB moved: the gateway process, the JobManager's JVM, curl. */
  cpu: { gateway: number; jobManager: number; curl: number };
  /** The gateway's CPU seconds per GiB by thread name (see threadCpuSeconds). */
  gatewayThreads?: Record<string, number>;
}

/**
 * curl -F of one jar to <base>/v1/jars/upload; MiB/s from curl's time_total; the jar is deleted
 * after (outside the CPU counts).
 */
async function curlUpload(
  base: string,
  deleteVia: string,
  path: string,
  size: number,
  pids: { gateway?: number; jobManager: number },
): Promise<UploadRun> {
  const gib = size / 1024 ** 3;
  const before = {
    gateway: pids.gateway ? processCpuSeconds(pids.gateway) : 0,
    jobManager: processCpuSeconds(pids.jobManager),
    curl: childrenCpuSeconds(),
  };
  const threadsBefore = pids.gateway ? threadCpuSeconds(pids.gateway) : {};
  const r = await curl(['-f', '-X', 'POST', '-H', 'Expect:', '-F', `jarfile=@${path}`, '-w', '\n%{time_total}', `${base}/v1/jars/upload`]);
  const cpu = {
    gateway: round((pids.gateway ? processCpuSeconds(pids.gateway) - before.gateway : 0) / gib),
    jobManager: round((processCpuSeconds(pids.jobManager) - before.jobManager) / gib),
    curl: round((childrenCpuSeconds() - before.curl) / gib),
  };
  const gatewayThreads = pids.gateway
    ? Object.fromEntries(
        Object.entries(threadCpuSeconds(pids.gateway)).map(([name, s]) => [name, round((s - (threadsBefore[name] ?? 0)) / gib)]),
      )
    : undefined;
  const [body, secs] = r.stdout.trim().split('\n');
  await deleteJar(deleteVia, jarIdOf(JSON.parse(body!)));
  return { mibPerSec: size / MiB / Number(secs), cpu, ...(gatewayThreads ? { gatewayThreads } : {}) };
}

const medianOf = (runs: UploadRun[], key: keyof UploadRun['cpu']) => summarize(runs.map((r) => r.cpu[key])).median;

/** Median CPU-s per GiB of each gateway thread name over the runs (0 in a run where it did not show). */
function threadMedians(runs: UploadRun[]): Record<string, number> {
  const names = [...new Set(runs.flatMap((r) => Object.keys(r.gatewayThreads ?? {})))].sort();
  return Object.fromEntries(
    names.map((n) => [n, summarize(runs.map((r) => r.gatewayThreads?.[n] ?? 0)).median]).filter(([, v]) => (v as number) > 0),
  );
}

/**
 * Measure 5: POST /jars/upload through the gateway (streamed, hashed, zip-checked) vs directly, once
 * per hand-off: `shared-dir` links the checked spool file into the JobManager's jar directory (ADR
 * 0019); `upload` streams the jar on to the JobManager's own /v1/jars/upload as it arrives.
 */
export async function uploadThroughput(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const jar = await env.jar(plan.smoke ? 8 * MiB : 200 * MiB);
  for (const handoff of ['shared-dir', 'upload'] as const) {
    const gw = await env.gateway(handoff === 'shared-dir' ? 'shared' : 'upload', handoff);
    const { gateway, anchor } = await sideBySide(
      plan,
      `upload (${handoff})`,
      () => curlUpload(gw.url, flink.restUrl, jar.path, jar.size, { gateway: gw.pid, jobManager: flink.pid }),
      () => curlUpload(flink.restUrl, flink.restUrl, jar.path, jar.size, { jobManager: flink.pid }),
    );
    const g = summarize(gateway.map((r) => r.mibPerSec));
    const a = summarize(anchor.map((r) => r.mibPerSec));
    const ratio = round(g.median / a.median);
    emit({
      name: handoff === 'shared-dir' ? 'upload.200MB' : 'upload.200MB.upload-handoff',
      unit: 'MiB/s',
      gateway: g,
      anchor: a,
      ratio,
      ratioIs: `gateway/anchor (throughput; higher is better); both sides: curl -F jarfile=@<jar> …/v1/jars/upload; gateway hand-off ${handoff}`,
      target: '≥ 0.9× direct',
      met: judged(plan, true, ratio >= 0.9),
      smoke: plan.smoke,
      params: {
        bytes: jar.size,
        handoff,
        // Medians; the three processes share the machine's cores.
        cpuSecPerGiB: {
          gateway: { gateway: medianOf(gateway, 'gateway'), jobManager: medianOf(gateway, 'jobManager'), curl: medianOf(gateway, 'curl') },
          anchor: { jobManager: medianOf(anchor, 'jobManager'), curl: medianOf(anchor, 'curl') },
        },
        // Where the gateway's CPU goes: main thread, V8's helpers (GC), libuv's pool (file writes), digest helpers.
        gatewayCpuSecPerGiBByThread: threadMedians(gateway),
        reps: plan.reps,
        warmups: plan.warmups,
      },
    });
  }
}
