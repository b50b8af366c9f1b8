import { type Clock, systemClock } from '../clock';

/**
 * Runs are single-flight by jobId: while a run is in flight, or after it was accepted (for
 * `retentionMs`), another run with the same id gets the first result instead of starting a second
 * job. Failed runs are forgotten at once so that a retry really retries (the operator reuses its
 * jobId after a failure). An accepted result is only a memory: the caller checks that the
 * JobManager still knows the job before it lets `run` answer from it, and `forget`s it otherwise.
 */
export class SingleFlight<T> {
  private readonly inflight = new Map<string, Promise<T>>();
  private readonly accepted = new Map<string, { value: T; at: number }>();

  constructor(
    private readonly retentionMs: number,
    /** The gateway's one clock; retention is a delay, so only its monotonic side is read. */
    private readonly clock: Pick<Clock, 'monotonicMs'> = systemClock,
    private readonly maxAccepted = 100_000,
  ) {}

  /** Returns `{ value, shared }`: `shared` is true when an earlier run's result was reused. */
  async run(key: string, fn: () => Promise<T>): Promise<{ value: T; shared: boolean }> {
    this.prune();
    const done = this.accepted.get(key);
    if (done) return { value: done.value, shared: true };
    const pending = this.inflight.get(key);
    if (pending) return { value: await pending, shared: true };
    const p = fn();
    this.inflight.set(key, p);
    try {
      const value = await p;
      this.accepted.set(key, { value, at: this.clock.monotonicMs() });
      return { value, shared: false };
    } finally {
      this.inflight.delete(key);
    }
  }

  /** Whether a run under `key` is in flight right now. */
  inFlight(key: string): boolean {
    return this.inflight.has(key);
  }

  /** Whether an accepted result under `key` would answer the next `run`. */
  remembers(key: string): boolean {
    this.prune();
    return this.accepted.has(key);
  }

  /** Drops the accepted result under `key` (its job is gone), so that the next `run` runs. */
  forget(key: string): void {
    this.accepted.delete(key);
  }

  private prune(): void {
    const cutoff = this.clock.monotonicMs() - this.retentionMs;
    // Map iteration is insertion order, i.e. oldest first.
    for (const [k, v] of this.accepted) {
      if (v.at >= cutoff && this.accepted.size <= this.maxAccepted) break;
      this.accepted.delete(k);
    }
  }
}
