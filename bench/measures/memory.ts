import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { newJobId } from '../../test/helpers/flink';
import { type BenchEnv, type BenchJar, deleteJar, jarIdOf, runJar, settle, uploadPlaceholder } from '../lib/env';
import { curl, memoryOf, resetPeakRss } from '../lib/procs';
import { emit, judged, MiB, note, type RunPlan, round, selected, summarize } from '../lib/report';

/** One way a jar moves through the gateway: by URI (fetch, hand-off, run) or by POST /jars/upload. */
interface MemoryCase {
  name: string;
  handoff: 'shared-dir' | 'upload';
  via: 'uri' | 'upload' | 'job-graph';
  what: string;
}

const CASES: MemoryCase[] = [
  { name: 'memory.rss-growth.1GiB', handoff: 'upload', via: 'uri', what: 'run by URI: fetch to disk, stream to /v1/jars/upload, run' },
  {
    name: 'memory.rss-growth.1GiB.shared-dir',
    handoff: 'shared-dir',
    via: 'uri',
    what: "run by URI: fetch to disk, link into the JobManager's jar directory, run",
  },
  {
    name: 'memory.rss-growth.1GiB.jar-upload',
    handoff: 'upload',
    via: 'upload',
    what: 'POST /jars/upload (curl -F): spooled, hashed, checked and streamed on to the JobManager',
  },
  {
    name: 'memory.rss-growth.1GiB.jar-upload.shared-dir',
    handoff: 'shared-dir',
    via: 'upload',
    what: "POST /jars/upload (curl -F): spooled, hashed, checked and linked into the JobManager's jar directory",
  },
  {
    name: 'memory.rss-growth.1GiB.job-graph',
    handoff: 'upload',
    via: 'job-graph',
    what: "POST /v1/jobs (curl -F, as Flink's RestClusterClient sends a job graph with its jar) passed through to the JobManager; the graph is not a real one, so the JobManager refuses it after reading the whole body",
  },
];

/** A job graph file that is not one: the JobManager reads the whole request before it tries it. */
const NOT_A_JOB_GRAPH = Buffer.from('not a serialized JobGraph');

/**
 * Measure 6: peak RSS growth of a gateway process (its own process, so only the gateway is
 * measured) while a large jar moves through it: by URI with each hand-off (fetched to disk, handed
 * to the JobManager, run), and by POST /jars/upload with each hand-off. Growth = peak during a
 * request − the idle RSS after a small warm-up jar on the same path; the peak is the kernel's VmHWM
 * (reset through /proc/<pid>/clear_refs before each request) and, as a cross-check, VmRSS sampled
 * every 10 ms. One gateway process per case.
 */
export async function rssGrowth(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const origin = await env.origin();
  const big = await env.jar(plan.smoke ? 16 * MiB : 1024 * MiB);
  const small = await env.jar(8 * MiB);
  for (const c of CASES.filter((x) => selected(plan, x.name))) {
    const gw = await env.gateway(`memory-${c.handoff}-${c.via}`, c.handoff);
    const placeholder = c.via === 'uri' ? await uploadPlaceholder(gw.url) : undefined;
    /** Moves one jar through the gateway; resolves with what to do after the peak window (settle the job, delete the jar). */
    const moveOnce = async (jar: BenchJar, r: number): Promise<() => Promise<void>> => {
      if (placeholder !== undefined) {
        const jobId = newJobId();
        await runJar(gw.url, placeholder, jobId, {
          'user.artifacts.job-jar': `${origin.url}/rss/${r}-${randomBytes(4).toString('hex')}/${jar.name}`,
        });
        return () => settle(flink, jobId);
      }
      if (c.via === 'job-graph') {
        const graph = env.scratch('job-graph.bin');
        writeFileSync(graph, NOT_A_JOB_GRAPH);
        const request = JSON.stringify({ jobGraphFileName: 'job.graph', jobJarFileNames: [jar.name], jobArtifactFileNames: [] });
        const sent = await curl([
          '-sS',
          '-X',
          'POST',
          '-H',
          'Expect:',
          '-o',
          '/dev/null',
          '-w',
          '%{http_code} %{size_upload}',
          '-F',
          `request=${request};type=application/json`,
          '-F',
          `file_0=@${graph};filename=job.graph`,
          '-F',
          `file_1=@${jar.path};filename=${jar.name}`,
          `${gw.url}/v1/jobs`,
        ]);
        const [status, uploaded] = sent.stdout.trim().split(' ').map(Number);
        if (!(uploaded! >= jar.size) || status === 200 || status === 202)
          throw new Error(
            `POST /v1/jobs answered ${status} after ${uploaded} bytes; expected the JobManager to read it all and refuse the graph`,
          );
        return async () => rmSync(graph, { force: true });
      }
      const up = await curl(['-f', '-sS', '-X', 'POST', '-H', 'Expect:', '-F', `jarfile=@${jar.path}`, `${gw.url}/v1/jars/upload`]);
      const jarId = jarIdOf(JSON.parse(up.stdout));
      return () => deleteJar(gw.url, jarId);
    };
    try {
      // Warm-up: the same path once with a small jar, so that code loading, JIT and helper threads are not counted.
      await (await moveOnce(small, -1))();
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
            /* process gone: the move will fail */
          }
        }, 10);
        let after: () => Promise<void>;
        try {
          after = await moveOnce(big, r);
        } finally {
          clearInterval(timer);
        }
        const { rss, hwm } = memoryOf(gw.pid);
        const peak = Math.max(hwmReset ? hwm : 0, sampled, rss);
        growth.push((peak - idle) / MiB);
        perRequest.push((peak - before) / MiB);
        baselines.push(before / MiB);
        await after();
        note(
          `${c.name}: rep ${r + 1}/${plan.reps}: before ${round(before / MiB, 1)} MiB, peak ${round(peak / MiB, 1)} MiB (idle ${round(idle / MiB, 1)} MiB)`,
        );
      }
      const g = summarize(growth);
      emit({
        name: c.name,
        unit: 'MiB',
        gateway: g,
        anchor: null,
        ratio: null,
        ratioIs:
          'n/a (absolute target, judged on the worst repetition); growth = peak RSS during the request − idle RSS after the warm-up, before the first large jar',
        target: '≤ 64 MiB peak RSS growth',
        met: judged(plan, true, g.max <= 64),
        smoke: plan.smoke,
        params: {
          jarBytes: big.size,
          handoff: c.handoff,
          via: c.via,
          path: c.what,
          idleRssMiB: round(idle / MiB, 1),
          peakSource: hwmReset
            ? 'VmHWM reset through clear_refs before each request, and VmRSS sampled every 10 ms'
            : 'VmRSS sampled every 10 ms (clear_refs refused)',
          perRequestGrowthMiB: summarize(perRequest),
          rssBeforeEachMiB: summarize(baselines),
          warmups: 1,
          reps: plan.reps,
        },
      });
    } finally {
      if (placeholder !== undefined) await deleteJar(gw.url, placeholder).catch(() => undefined);
    }
  }
}
