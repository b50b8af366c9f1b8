import type { BenchEnv } from '../lib/env';
import { fixedRate, type RateResult } from '../lib/loadgen';
import { runCommand } from '../lib/procs';
import { emit, judged, note, type RunPlan, round, sideBySide, summarize } from '../lib/report';

/** Saturation throughput with wrk (information only: JVM, gateway and wrk share 2 cores). */
async function saturation(url: string): Promise<number | string> {
  try {
    const r = await runCommand('wrk', ['-t1', '-c8', '-d3s', url], 20_000);
    const m = /Requests\/sec:\s+([\d.]+)/.exec(r.stdout);
    return m ? Number(m[1]) : `wrk gave no rate (exit ${r.status})`;
  } catch (err) {
    return `wrk unavailable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  }
}

/**
 * Measure 4: latency added by the pass-through at a fixed, modest request rate, for two read-only
 * JobManager routes, gateway vs direct.
 */
export async function passThrough(env: BenchEnv, plan: RunPlan): Promise<void> {
  const flink = await env.flink();
  const gw = await env.gateway('shared', 'shared-dir');
  const rate = plan.smoke ? 50 : 200;
  const durationMs = plan.smoke ? 1000 : 4000;
  for (const [label, path] of [
    ['overview', '/v1/overview'],
    ['jobs-overview', '/v1/jobs/overview'],
  ] as const) {
    const { gateway, anchor } = await sideBySide<RateResult>(
      plan,
      `pass-through ${path}`,
      () => fixedRate(`${gw.url}${path}`, rate, durationMs),
      () => fixedRate(`${flink.restUrl}${path}`, rate, durationMs),
    );
    const errors = { gateway: gateway.reduce((n, r) => n + r.errors, 0), anchor: anchor.reduce((n, r) => n + r.errors, 0) };
    if (errors.gateway + errors.anchor > 0)
      note(`pass-through ${path}: ${errors.gateway} gateway / ${errors.anchor} direct requests failed`);
    const sat = plan.smoke
      ? undefined
      : { gateway: await saturation(`${gw.url}${path}`), direct: await saturation(`${flink.restUrl}${path}`) };
    for (const [p, limit] of [
      ['p50', 1],
      ['p99', 5],
    ] as const) {
      const g = summarize(gateway.map((r) => r[p]));
      const a = summarize(anchor.map((r) => r[p]));
      const added = round(g.median - a.median);
      const dueKey = p === 'p50' ? 'dueP50' : 'dueP99';
      emit({
        name: `passthrough.${label}.${p}`,
        unit: 'ms',
        gateway: g,
        anchor: a,
        ratio: round(g.median / a.median),
        ratioIs: 'gateway/anchor (latency; lower is better); the target is on addedMs = median gateway − median direct',
        target: `${p} added ≤ ${limit} ms`,
        met: judged(plan, true, added <= limit),
        smoke: plan.smoke,
        params: {
          addedMs: added,
          path,
          ratePerSec: rate,
          durationMs,
          requestsPerRep: Math.round((rate * durationMs) / 1000),
          errors,
          fromDueTime: { gateway: summarize(gateway.map((r) => r[dueKey])).median, anchor: summarize(anchor.map((r) => r[dueKey])).median },
          ...(sat
            ? { saturationRps: sat, saturationNote: 'wrk -t1 -c8 -d3s; information only (2 cores shared by JVM, gateway and wrk)' }
            : {}),
          reps: plan.reps,
          warmups: plan.warmups,
        },
      });
    }
  }
}
