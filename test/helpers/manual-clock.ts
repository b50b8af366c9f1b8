import { type Clock, MAX_TIMER_MS, type TimerHandle } from '../../src/clock';

interface Timer {
  id: number;
  at: number;
  fn: () => void;
}

/**
 * A clock whose time stands still and whose timers never fire: anything timed by it takes no time
 * (the lone-stream probe of a parallel read then always finds its first request fast enough).
 */
export const stillClock: Clock = { monotonicMs: () => 0, wallMs: () => Date.now(), setTimer: () => ({ cancel: () => undefined }) };

/** Lets promise chains started by a timer run to their next real wait (all fakes resolve at once). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * A clock driven by hand. Timers behave like Node's: a delay above 2^31-1 ms fires after 1 ms
 * (counted in `overlongTimers`), so code that forgets to chain long timers fails its test.
 */
export class ManualClock implements Clock {
  private mono = 1_000;
  private wall: number;
  private timers: Timer[] = [];
  private nextId = 1;
  overlongTimers = 0;
  /** When set, the next `setTimer` throws it (a scheduler fault that cannot be provoked for real). */
  failNextSetTimer: Error | undefined;

  constructor(wallStart = Date.UTC(2026, 0, 1)) {
    this.wall = wallStart;
  }

  monotonicMs(): number {
    return this.mono;
  }

  wallMs(): number {
    return this.wall;
  }

  setTimer(fn: () => void, ms: number): TimerHandle {
    if (this.failNextSetTimer) {
      const err = this.failNextSetTimer;
      this.failNextSetTimer = undefined;
      throw err;
    }
    let delay = ms;
    if (!(ms <= MAX_TIMER_MS)) {
      this.overlongTimers++;
      delay = 1;
    }
    const t: Timer = { id: this.nextId++, at: this.mono + Math.max(0, delay), fn };
    this.timers.push(t);
    return { cancel: () => (this.timers = this.timers.filter((x) => x.id !== t.id)) };
  }

  /** Delays (from now) of the pending timers, soonest first. */
  pending(): number[] {
    return this.timers.map((t) => t.at - this.mono).sort((a, b) => a - b);
  }

  /** Moves both clocks forward, firing due timers in order and letting their work settle. */
  async advance(ms: number): Promise<void> {
    const target = this.mono + ms;
    await flush();
    for (let guard = 0; guard < 10_000; guard++) {
      const due = this.timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.wall += due.at - this.mono;
      this.mono = due.at;
      this.timers = this.timers.filter((t) => t.id !== due.id);
      due.fn();
      await flush();
    }
    this.wall += target - this.mono;
    this.mono = target;
    await flush();
  }

  /** Steps the wall clock only (NTP correction, a VM resumed): the monotonic clock does not move. */
  jumpWall(ms: number): void {
    this.wall += ms;
  }
}
