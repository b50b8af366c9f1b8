/** Statistics and the one-JSON-object-per-measure output of the benchmarks. */

import { loadavg } from 'node:os';

export const MiB = 1024 * 1024;

export interface Summary {
  min: number;
  median: number;
  max: number;
  /** Every repetition, in run order. */
  values: number[];
}

export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) throw new Error('no values to summarize');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { min: round(sorted[0]!), median: round(median), max: round(sorted[sorted.length - 1]!), values: values.map((v) => round(v)) };
}

export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** p-th percentile (0..100) by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export interface Measure {
  name: string;
  unit: string;
  gateway: Summary | null;
  anchor: Summary | null;
  /** Median-based ratio; `ratioIs` says which way round. */
  ratio: number | null;
  ratioIs: string;
  /** The measure's target in words, or null where none is set (information only). */
  target: string | null;
  /** Whether the target is met; null in smoke mode or where there is no target. */
  met: boolean | null;
  smoke: boolean;
  params: Record<string, unknown>;
}

/** Prints one measure as one line of JSON on stdout (progress goes to stderr). */
export function emit(m: Measure): void {
  // The 1-minute load average when the measure ends: other work on the machine shows up here.
  const out = { ...m, params: { ...m.params, loadAvg1m: round(loadavg()[0] ?? Number.NaN, 2) } };
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

const t0 = performance.now();
export function note(msg: string): void {
  process.stderr.write(`[bench ${((performance.now() - t0) / 1000).toFixed(1)}s] ${msg}\n`);
}

export interface RunPlan {
  smoke: boolean;
  warmups: number;
  reps: number;
  /** Only these cases (measure names, e.g. fetch.http) of a measure that has several; all when absent. */
  cases?: string[];
}

/** Whether a case of a measure is selected by --cases. */
export function selected(plan: RunPlan, name: string): boolean {
  return plan.cases === undefined || plan.cases.includes(name);
}

/**
 * Runs `warmups` unmeasured rounds, then `reps` measured ones. Each round runs both sides; the order
 * alternates between rounds so that drift (page cache, JIT, a busy JVM) does not favour one side.
 */
export async function sideBySide<G, A = G>(
  plan: RunPlan,
  label: string,
  gatewaySide: (round: number) => Promise<G>,
  anchorSide: (round: number) => Promise<A>,
): Promise<{ gateway: G[]; anchor: A[] }> {
  const gateway: G[] = [];
  const anchor: A[] = [];
  const total = plan.warmups + plan.reps;
  for (let r = 0; r < total; r++) {
    const warm = r < plan.warmups;
    const runGateway = async () => {
      const v = await gatewaySide(r);
      if (!warm) gateway.push(v);
    };
    const runAnchor = async () => {
      const v = await anchorSide(r);
      if (!warm) anchor.push(v);
    };
    if (r % 2 === 0) {
      await runAnchor();
      await runGateway();
    } else {
      await runGateway();
      await runAnchor();
    }
    note(`${label}: ${warm ? 'warm-up' : `rep ${r - plan.warmups + 1}/${plan.reps}`} done`);
  }
  return { gateway, anchor };
}

/** `met` is only judged in full runs and where a target exists. */
export function judged(plan: RunPlan, hasTarget: boolean, ok: boolean): boolean | null {
  return plan.smoke || !hasTarget ? null : ok;
}
