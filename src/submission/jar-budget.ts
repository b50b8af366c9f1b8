import { GatewayError } from '../errors/gateway-error';

/** The limits of one JarBudget (gateway.jars.*). */
export interface JarBudgetLimits {
  /** gateway.jars.max-count-per-principal */
  maxCount: number;
  /** gateway.jars.max-size-per-principal */
  maxBytes: number;
  /** gateway.jars.max-total-size: every jar the gateway put in the JobManager's upload directory, transient ones included. */
  maxTotalBytes: number;
}

export const JAR_BUDGET_OPTIONS = {
  count: 'gateway.jars.max-count-per-principal',
  bytes: 'gateway.jars.max-size-per-principal',
  total: 'gateway.jars.max-total-size',
} as const;

interface Holding {
  count: number;
  bytes: number;
}

/**
 * What the jars the gateway leaves on the JobManager may take, per principal (count and bytes) and
 * in all (bytes). Every check is a reservation: it is decided and charged in one synchronous step,
 * so that requests racing each other through awaited work (a fetch, an upload's body) can never
 * pass a check together and leave more than the budget. A reservation grows as the jar's bytes
 * become known (`ensure`), each step checked the same way; it is given back when the jar never
 * lands (`cancel`), and a kept jar when it is deleted or the JobManager no longer lists it (`giveBack`,
 * `reconcile`).
 *
 * Transient jars (a run by URI: handed to the JobManager, deleted after the run) are charged to the
 * ceiling only, while present: they take the same disk, but they are not anyone's to keep.
 *
 * The budget lives in memory, like the jar book: after a restart the jars left before it are no
 * one's and charge nothing (docs/security.md).
 */
export class JarBudget {
  private readonly principals = new Map<string, Holding>();
  private totalBytes = 0;
  /** Kept jars: their reservation, and when they were kept (for `reconcile`). */
  private readonly kept = new Map<string, { reservation: JarReservation; at: number }>();
  private clock = 0;

  constructor(readonly limits: JarBudgetLimits) {}

  /**
   * Reserves one jar of at least `bytes` for `principal` (undefined: a transient jar, charged to the
   * ceiling only). Throws 429 GW_JAR_QUOTA (the principal's budget) or GW_JAR_CEILING (the
   * upload directory's) and charges nothing when it does not fit.
   */
  reserve(principal: string | undefined, bytes = 0): JarReservation {
    if (principal !== undefined) {
      const held = this.holding(principal);
      if (held.count + 1 > this.limits.maxCount) {
        throw quota(principal, `${this.limits.maxCount} jars`, `${held.count + 1} jars`, JAR_BUDGET_OPTIONS.count);
      }
    }
    this.check(principal, bytes);
    if (principal !== undefined) {
      const held = this.holding(principal);
      held.count += 1;
      this.principals.set(principal, held);
    }
    this.charge(principal, bytes);
    return new JarReservation(this, principal, bytes);
  }

  /** A kept jar is gone from the JobManager (deleted, or no longer listed): its budget comes back. */
  giveBack(jarId: string): void {
    const entry = this.kept.get(jarId);
    if (!entry) return;
    this.kept.delete(jarId);
    entry.reservation.cancel();
  }

  /** A mark to take before listing the JobManager's jars, for `reconcile`. */
  mark(): number {
    return this.clock;
  }

  /**
   * The JobManager listed `present` in answer to a listing started after `mark`: every jar kept
   * before that mark and not listed has left the JobManager (a restart empties its upload directory;
   * a DELETE may have reached it another way) and is given back. Jars kept since may be missing from
   * the listing only because they arrived after it. Returns the ids given back.
   */
  reconcile(present: ReadonlySet<string>, mark: number): string[] {
    const gone: string[] = [];
    for (const [jarId, entry] of this.kept) {
      if (entry.at <= mark && !present.has(jarId)) gone.push(jarId);
    }
    for (const jarId of gone) this.giveBack(jarId);
    return gone;
  }

  /** What `principal` holds (kept and reserved): count and bytes. */
  heldBy(principal: string): Readonly<Holding> {
    return { ...this.holding(principal) };
  }

  /** Bytes of every jar the gateway keeps or is putting in the upload directory. */
  get total(): number {
    return this.totalBytes;
  }

  /** @internal JarReservation's: more bytes, checked (unless `landed`: they are on the JobManager already) and charged in one step. */
  grow(principal: string | undefined, delta: number, landed = false): void {
    if (delta <= 0) return;
    if (!landed) this.check(principal, delta);
    this.charge(principal, delta);
  }

  /** @internal JarReservation's: fewer bytes (or the whole jar, with `count`). */
  shrink(principal: string | undefined, bytes: number, count: number): void {
    this.totalBytes = Math.max(0, this.totalBytes - bytes);
    if (principal === undefined) return;
    const held = this.holding(principal);
    held.bytes = Math.max(0, held.bytes - bytes);
    held.count = Math.max(0, held.count - count);
    if (held.count === 0 && held.bytes === 0) this.principals.delete(principal);
    else this.principals.set(principal, held);
  }

  /** @internal JarReservation's: the jar landed under `jarId`. */
  keep(jarId: string, reservation: JarReservation): void {
    this.clock += 1;
    this.kept.set(jarId, { reservation, at: this.clock });
  }

  private check(principal: string | undefined, delta: number): void {
    if (principal !== undefined) {
      const held = this.holding(principal);
      if (held.bytes + delta > this.limits.maxBytes) {
        throw quota(principal, `${this.limits.maxBytes} bytes`, `at least ${held.bytes + delta} bytes`, JAR_BUDGET_OPTIONS.bytes);
      }
    }
    if (this.totalBytes + delta > this.limits.maxTotalBytes) {
      throw new GatewayError('GW_JAR_CEILING', {
        limit: this.limits.maxTotalBytes,
        would: this.totalBytes + delta,
        option: JAR_BUDGET_OPTIONS.total,
      });
    }
  }

  private charge(principal: string | undefined, delta: number): void {
    this.totalBytes += delta;
    if (principal === undefined) return;
    const held = this.holding(principal);
    held.bytes += delta;
    this.principals.set(principal, held);
  }

  private holding(principal: string): Holding {
    return this.principals.get(principal) ?? { count: 0, bytes: 0 };
  }
}

/** One jar's share of a JarBudget, from the check until the jar is kept or given back. */
export class JarReservation {
  private done = false;
  private kept = false;

  constructor(
    private readonly budget: JarBudget,
    private readonly principal: string | undefined,
    private bytes: number,
  ) {}

  /** At least `bytes` now (the jar's bytes so far, or its size once known); throws 429 as `reserve` does, charging nothing more. */
  ensure(bytes: number): void {
    if (this.done || bytes <= this.bytes) return;
    this.budget.grow(this.principal, bytes - this.bytes);
    this.bytes = bytes;
  }

  /**
   * The jar landed on the JobManager as `jarId`, `bytes` long: it holds its share until given back.
   * Never throws: callers `ensure` the size before the hand-off, and a jar that is there is counted
   * as it is.
   */
  keep(jarId: string, bytes: number): void {
    if (this.done || this.kept) return;
    if (bytes > this.bytes) {
      this.budget.grow(this.principal, bytes - this.bytes, true);
      this.bytes = bytes;
    } else if (bytes < this.bytes) {
      this.budget.shrink(this.principal, this.bytes - bytes, 0);
      this.bytes = bytes;
    }
    this.kept = true;
    this.budget.keep(jarId, this);
  }

  /** Gives the whole share back. Idempotent; a kept jar is given back through `JarBudget.giveBack`. */
  cancel(): void {
    if (this.done) return;
    this.done = true;
    this.budget.shrink(this.principal, this.bytes, this.principal === undefined ? 0 : 1);
  }
}

/** True for the two budget refusals. */
export function isBudgetRefusal(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === 'GW_JAR_QUOTA' || code === 'GW_JAR_CEILING';
}

function quota(principal: string, limit: string, would: string, option: string): GatewayError {
  return new GatewayError('GW_JAR_QUOTA', { principal, limit, would, option });
}
