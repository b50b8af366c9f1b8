import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { newJobId } from '../../test/helpers/flink';
import { type BenchEnv, deleteJar, runJar, settle, uploadPlaceholder } from '../lib/env';
import { memoryOf, resetPeakRss } from '../lib/procs';
import { emit, judged, MiB, note, type RunPlan, round, summarize } from '../lib/report';

/**
 * Measure 6: peak RSS growth of a gateway process (its own process, so only the gateway is
 * measured) while it fetches a large jar by URI and hands it off with the upload hand-off (fetch to
 * disk, then stream to /v1/jars/upload) and runs it. Growth = peak during a request − the idle RSS
 * after a small warm-up jar; the peak is the kernel's VmHWM (reset through /proc/<pid>/clear_refs
 * before each request) and, as a cross-check, VmRSS sampled every 10 ms.
 */
export async function rssGrowth(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const origin = await env.origin();
  const gw = await env.gateway('memory', 'upload');
  const big = await env.jar(plan.smoke ? 16 * MiB : 1024 * MiB);
  const small = await env.jar(8 * MiB);
  const placeholder = await uploadPlaceholder(gw.url);
  const runOnce = async (name: string, r: number) => {
    const jobId = newJobId();
    await runJar(gw.url, placeholder, jobId, { 'user.artifacts.job-jar': `${origin.url}/rss/${r}-${randomBytes(4).toString('hex')}/${name}` });
    return jobId;
  };
  try {
    // Warm-up: the same path once with a small jar, so that code loading and JIT are not counted.
    await settle(flink, await runOnce(small.name, -1));
    await sleep(1000);
    // The idle RSS after the warm-up and before the first large jar: growth is measured from here.
    const idle = memoryOf(gw.pid).rss;
    const growth: number[] = [];
    const perRequest: number[] = [];
    const baselines: number[] = [];
    let hwmReset = true;
    for (let r = 0; r < plan.reps; r++) {
      await sleep(500);
      const before = memoryOf(gw.pid).rss;
      hwmReset = resetPeakRss(gw.pid) && hwmReset;
      let sampled = before;
      const timer = setInterval(() => {
        try {
          sampled = Math.max(sampled, memoryOf(gw.pid).rss);
        } catch {
          /* process gone: the run will fail */
        }
      }, 10);
      let jobId: string;
      try {
        jobId = await runOnce(big.name, r);
      } finally {
        clearInterval(timer);
      }
      const { rss, hwm } = memoryOf(gw.pid);
      const peak = Math.max(hwmReset ? hwm : 0, sampled, rss);
      growth.push((peak - idle) / MiB);
      perRequest.push((peak - before) / MiB);
      baselines.push(before / MiB);
      await settle(flink, jobId);
      note(`rss: rep ${r + 1}/${plan.reps}: before ${round(before / MiB, 1)} MiB, peak ${round(peak / MiB, 1)} MiB (idle ${round(idle / MiB, 1)} MiB)`);
    }
    const g = summarize(growth);
    emit({
      name: 'memory.rss-growth.1GiB',
      unit: 'MiB',
      gateway: g,
      anchor: null,
      ratio: null,
      ratioIs: 'n/a (absolute target, judged on the worst repetition); growth = peak RSS during the request − idle RSS after the warm-up, before the first large jar',
      target: '≤ 64 MiB peak RSS growth',
      met: judged(plan, true, g.max <= 64),
      smoke: plan.smoke,
      params: {
        jarBytes: big.size,
        handoff: 'upload',
        idleRssMiB: round(idle / MiB, 1),
        peakSource: hwmReset ? 'VmHWM reset through clear_refs before each request, and VmRSS sampled every 10 ms' : 'VmRSS sampled every 10 ms (clear_refs refused)',
        perRequestGrowthMiB: summarize(perRequest),
        rssBeforeEachMiB: summarize(baselines),
        warmups: 1,
        reps: plan.reps,
      },
    });
  } finally {
    await deleteJar(gw.url, placeholder).catch(() => undefined);
  }
}
