/**
 * Time as the gateway's timing logic sees it (token renewal, re-obtain cooldown, the job watcher, the run
 * de-duplication window of `SingleFlight`): the one clock of the tree.
 * Injected everywhere so tests drive time by hand instead of sleeping.
 *
 * Two clocks, never mixed in one expression: `monotonicMs` for delays, cooldowns and grace periods
 * (immune to wall-clock steps), `wallMs` only for absolute instants such as a token's `validUntil`.
 */
export interface Clock {
  /** Monotonic milliseconds (`performance.now()`); only differences are meaningful. */
  monotonicMs(): number;
  /** Epoch milliseconds (`Date.now()`). */
  wallMs(): number;
  /** One-shot timer. `ms` must not exceed {@link MAX_TIMER_MS} (see `setLongTimer`). */
  setTimer(fn: () => void, ms: number): TimerHandle;
}

export interface TimerHandle {
  cancel(): void;
}

/**
 * Node runs a `setTimeout` whose delay exceeds 2^31-1 ms (about 24.8 days) after 1 ms, with only a
 * process warning. Longer delays must be chained.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/** The real clock; its timers do not keep the process alive. */
export const systemClock: Clock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};

/**
 * A timer of any length: delays above {@link MAX_TIMER_MS} are split into chained timers, each
 * re-measuring what is left on the monotonic clock, so the callback never fires early.
 */
export function setLongTimer(clock: Clock, fn: () => void, ms: number, maxStepMs = MAX_TIMER_MS): TimerHandle {
  const dueAt = clock.monotonicMs() + Math.max(0, ms);
  let current: TimerHandle | undefined;
  let cancelled = false;
  const arm = (remaining: number) => {
    if (remaining <= maxStepMs) {
      current = clock.setTimer(fn, Math.max(0, remaining));
      return;
    }
    current = clock.setTimer(() => {
      if (!cancelled) arm(dueAt - clock.monotonicMs());
    }, maxStepMs);
  };
  arm(Math.max(0, ms));
  return {
    cancel() {
      cancelled = true;
      current?.cancel();
    },
  };
}

/**
 * Waits `ms` on `clock` (so a test drives retry back-offs by hand instead of waiting them out).
 * Rejects as soon as `signal` aborts, with the same error as `timers/promises`' `setTimeout`
 * (`AbortError`, code `ABORT_ERR`, the signal's reason as its cause).
 */
export function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  const aborted = () =>
    Object.assign(new Error('The operation was aborted', { cause: signal?.reason }), { name: 'AbortError', code: 'ABORT_ERR' });
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted());
      return;
    }
    const onAbort = () => {
      timer.cancel();
      reject(aborted());
    };
    const timer = setLongTimer(
      clock,
      () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      },
      ms,
    );
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
