/**
 * The arithmetic of renewal and retry, as Flink's manager does it, kept apart from the manager's
 * state machine so each rule can be read and tested on its own. Inputs that are absolute instants
 * (`validUntil`, `wallNow`) are wall-clock epoch milliseconds; results are delays in milliseconds.
 */

/**
 * Delay until the next renewal: `ratio × (earliest validUntil − now)`, rounded. Negative when the
 * token has already expired (or the clocks disagree); the scheduler clamps that to 0.
 */
export function renewalDelay(ratio: number, earliestValidUntil: number, wallNow: number): number {
  return Math.round(ratio * (earliestValidUntil - wallNow));
}

export interface RetryBackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Uniform in [0, 1); injectable for tests. */
  random?: () => number;
}

/**
 * Exponential retry backoff after failed obtain cycles (FLINK-40008): starts at `initialMs`,
 * doubles per failure up to `maxMs`, ±50 % jitter, and is capped at a third of the remaining
 * validity of the last known tokens, so a retry always happens while they are still live. Once they
 * have expired, the cap falls back to `maxMs`.
 */
export class RetryBackoff {
  private current: number;
  /** The earliest `validUntil` of the last successful cycle (an expiry, not a renewal time). */
  private lastKnownExpiry: number | undefined;
  private readonly random: () => number;

  constructor(private readonly opts: RetryBackoffOptions) {
    this.current = opts.initialMs;
    this.random = opts.random ?? Math.random;
  }

  /** A successful cycle that produced an expiry: remember it and start the backoff afresh. */
  succeeded(earliestValidUntil: number): void {
    this.lastKnownExpiry = earliestValidUntil;
    this.current = this.opts.initialMs;
  }

  /** A new session starts with no history. */
  reset(): void {
    this.current = this.opts.initialMs;
    this.lastKnownExpiry = undefined;
  }

  /** The delay before the next retry; advances the backoff. */
  nextDelay(wallNow: number): number {
    let effectiveMax = this.opts.maxMs;
    if (this.lastKnownExpiry !== undefined) {
      const remaining = this.lastKnownExpiry - wallNow;
      if (remaining > 0) effectiveMax = Math.floor(remaining / 3);
    }
    const base = Math.min(this.current, effectiveMax);
    const jitter = (this.random() - 0.5) * base;
    const delay = Math.max(0, Math.min(Math.round(base + jitter), effectiveMax));
    this.current = Math.min(this.current * 2, this.opts.maxMs);
    return delay;
  }

  /** The base the next failure would use (before jitter and cap); for tests and status. */
  currentBase(): number {
    return this.current;
  }
}
