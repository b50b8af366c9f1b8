import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { percentile } from './report';

export interface RateResult {
  sent: number;
  ok: number;
  errors: number;
  /** Latency percentiles in ms, from when each request was actually sent. */
  p50: number;
  p99: number;
  max: number;
  /** The same from when each request was due (includes this generator's own timer lateness). */
  dueP50: number;
  dueP99: number;
}

/**
 * An open-loop, fixed-rate GET load (wrk2-style): request i is due at start + i/rate, whatever
 * happened to earlier requests (the loop never waits for answers, so slow answers cannot lower the
 * offered rate). Latency counts from the actual send; from the due time it is kept too. Bounded in count
 * (rate × duration) and in time (every request has a timeout; the run ends at most
 * `duration + 10 s` after it starts).
 */
export async function fixedRate(url: string, ratePerSec: number, durationMs: number, connections = 16): Promise<RateResult> {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections, pipelining: 1, keepAliveTimeout: 30_000 });
  const total = Math.round((ratePerSec * durationMs) / 1000);
  const interval = 1000 / ratePerSec;
  const latencies: number[] = [];
  const dueLatencies: number[] = [];
  let errors = 0;
  const pending = new Set<Promise<void>>();
  const start = performance.now() + 5;
  try {
    for (let i = 0; i < total; ) {
      const now = performance.now();
      while (i < total && start + i * interval <= now) {
        const due = start + i * interval;
        const sent = performance.now();
        const p = pool
          .request({ path: target.pathname + target.search, method: 'GET', headersTimeout: 10_000, bodyTimeout: 10_000 })
          .then(async (res) => {
            await res.body.text();
            const end = performance.now();
            if (res.statusCode === 200) {
              latencies.push(end - sent);
              dueLatencies.push(end - due);
            } else errors++;
          })
          .catch(() => {
            errors++;
          });
        pending.add(p);
        void p.finally(() => pending.delete(p));
        i++;
      }
      const next = start + i * interval - performance.now();
      if (i < total && next > 0) await sleep(next);
    }
    await Promise.race([Promise.all(pending), sleep(10_000)]);
  } finally {
    await pool.destroy();
  }
  return {
    sent: total,
    ok: latencies.length,
    errors,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.length ? Math.max(...latencies) : Number.NaN,
    dueP50: percentile(dueLatencies, 50),
    dueP99: percentile(dueLatencies, 99),
  };
}
