import type { Logger } from 'pino';
import { type Clock, setLongTimer, systemClock, type TimerHandle } from '../clock';
import type { Configuration } from '../config/registry';
import { NoopTokenManager } from './noop-token-manager';
import { loadServices } from './provider-loader';
import { notifyReceivers, obtainRound, type ProviderState, toContainer } from './obtain-round';
import { describeCause, isRefusal, providerFailed, tokensRejected } from '../plugin-kit/registration-error';
import { RetryBackoff, renewalDelay } from './renewal-schedule';
import type {
  DelegationTokenProvider,
  DelegationTokenReceiver,
  JobConfiguration,
  JobContext,
  TokenJobListener,
  TokenManager,
  TokenManagerListener,
  TokenStatus,
} from '../plugin-kit/token-spi';
import { effectiveRenewalRatio, tokenOptions, tokensEnabled } from './token-options';

export interface TokenManagerDeps {
  config: Configuration;
  providers: readonly DelegationTokenProvider[];
  receivers: readonly DelegationTokenReceiver[];
  log: Logger;
  clock?: Clock;
  /** Uniform in [0, 1), for the retry jitter. */
  random?: () => number;
  /** Told when jobs come and go (delivery by job: the token bridge, the file receiver). */
  jobListener?: TokenJobListener;
}

/** The manager for this configuration: the no-op one when `security.delegation.tokens.enabled` is false. */
export async function createTokenManager(deps: TokenManagerDeps): Promise<TokenManager> {
  if (!tokensEnabled(deps.config)) {
    deps.log.info(
      'delegation tokens are disabled (gateway.tokens.enabled, by default security.delegation.tokens.enabled, is false); job registration is a no-op',
    );
    return new NoopTokenManager();
  }
  return DefaultTokenManager.create(deps);
}

interface PendingTimer {
  handle: TimerHandle;
  /** Monotonic instant the timer is due. */
  dueAt: number;
}

/**
 * Port of Flink's DefaultDelegationTokenManager with the per-job extension of PR #28639
 * (docs/tokens.md lists where it departs from Flink's). Node has no threads, but every `await` interleaves, so the Java locks become
 * plain state re-checked after each await:
 * - one promise chain serialises obtain cycles (`renewalCycleLock`);
 * - `sessionEpoch` fences a cycle of an ended session: it neither delivers nor reschedules;
 * - `generation` fences stale timers; there is exactly one pending timer, shared by periodic
 *   renewal, failure retry and on-demand re-obtain (`renewal-schedule.ts` picks the delay);
 * - cooldown and scheduling use the monotonic clock, expiries the wall clock.
 */
export class DefaultTokenManager implements TokenManager {
  private providers = new Map<string, DelegationTokenProvider>();
  private receivers = new Map<string, DelegationTokenReceiver>();
  private readonly providerState = new Map<string, ProviderState>();
  /** jobId → registeredAt (wall). Tracked only once every provider accepted the job. */
  private readonly registered = new Map<string, number>();
  /** Providers whose `registerJob` failed unexpectedly (not a refusal): when, and why. */
  private readonly unhealthy = new Map<string, { at: number; message: string }>();

  private running = false;
  private closed = false;
  private closing?: Promise<void>;
  private sessionEpoch = 0;
  private generation = 0;
  private listener: TokenManagerListener | undefined;
  private timer: PendingTimer | undefined;
  private nextRenewalWall: number | undefined;
  /** A demand (re-obtain request) is pending; cleared when a cycle of this session starts. */
  private reobtainScheduled = false;
  /** Monotonic start of the last cycle that served a demand (the cooldown anchor). */
  private lastReobtainAt: number | undefined;
  private cycleChain: Promise<void> = Promise.resolve();
  /** An obtain cycle of the current session is between its start and its end. */
  private cycleRunning = false;
  private lastError: { at: number; message: string } | undefined;

  private readonly clock: Clock;
  private readonly backoff: RetryBackoff;
  private readonly ratio: number;
  private readonly cooldownMs: number;
  private readonly log: Logger;
  private readonly jobListener: TokenJobListener | undefined;

  private constructor(deps: TokenManagerDeps) {
    this.clock = deps.clock ?? systemClock;
    this.log = deps.log;
    this.jobListener = deps.jobListener;
    const { ratio, clamped } = effectiveRenewalRatio(deps.config);
    this.ratio = ratio;
    if (clamped) {
      this.log.warn(
        { key: tokenOptions.renewalRatio.key, given: deps.config.get(tokenOptions.renewalRatio), used: ratio },
        'the renewal ratio is outside 0.01 … 1 (Flink accepts it, but 0 or less renews back to back and more than 1 after expiry); the gateway uses the nearest usable value',
      );
    }
    this.cooldownMs = deps.config.get(tokenOptions.reobtainCooldown);
    this.backoff = new RetryBackoff({
      initialMs: deps.config.get(tokenOptions.retryInitialBackoff),
      maxMs: deps.config.get(tokenOptions.retryMaxBackoff),
      ...(deps.random ? { random: deps.random } : {}),
    });
  }

  /** Loads and initialises the enabled providers and receivers; fails on any start-up problem. */
  static async create(deps: TokenManagerDeps): Promise<DefaultTokenManager> {
    const manager = new DefaultTokenManager(deps);
    const loaded = await loadServices({
      config: deps.config,
      providers: deps.providers,
      receivers: deps.receivers,
      callback: { reobtainDelegationTokens: () => manager.reobtainDelegationTokens() },
      log: deps.log,
    });
    manager.providers = loaded.providers;
    manager.receivers = loaded.receivers;
    for (const name of loaded.providers.keys()) manager.providerState.set(name, {});
    return manager;
  }

  // ---- Sessions ------------------------------------------------------------------------------

  async start(listener?: TokenManagerListener): Promise<void> {
    if (this.closed) throw new Error('The delegation token manager is already closed, its providers are closed');
    if (this.running) {
      this.log.warn('DelegationTokenManager is already started, ignoring redundant start()');
      return;
    }
    this.running = true;
    const epoch = ++this.sessionEpoch;
    this.listener = listener;
    // Wait for a cycle of the previous session still in flight, then start with a clean history.
    await this.cycleChain;
    if (epoch !== this.sessionEpoch || !this.running) return;
    this.backoff.reset();
    if (this.providers.size === 0)
      this.log.info('no delegation token providers are enabled; jobs are registered but no tokens are obtained');
    await this.enqueueCycle(epoch);
  }

  async stop(): Promise<void> {
    this.log.info('Stopping credential renewal');
    this.running = false;
    this.cancelTimer();
    this.reobtainScheduled = false;
    this.lastReobtainAt = undefined;
    // Keeping the listener would pin whatever it belongs to.
    this.listener = undefined;
    this.nextRenewalWall = undefined;
    // Jobs of this session: running ones register again with the next session (after a gateway
    // restart, from the registration store); ones that ended meanwhile would otherwise leak.
    for (const jobId of [...this.registered.keys()]) {
      try {
        await this.unregisterJobInternal(jobId, 'session-end');
      } catch (err) {
        this.log.error({ jobId, err }, 'Failed to unregister job while stopping the manager');
      }
    }
    this.log.info('Stopped credential renewal');
  }

  close(): Promise<void> {
    if (this.closing) return this.closing;
    this.closed = true;
    this.closing = (async () => {
      await this.stop();
      // May overlap one in-flight obtain; providers must tolerate that (SPI contract).
      for (const [name, p] of this.providers) {
        try {
          await p.close?.();
        } catch (err) {
          this.log.error({ provider: name, err }, 'Failed to close delegation token provider');
        }
      }
    })();
    return this.closing;
  }

  // ---- On-demand re-obtain ------------------------------------------------------------------

  reobtainDelegationTokens(): void {
    if (!this.running) {
      this.log.debug(
        'Re-obtain of delegation tokens requested while the manager is not running (not started yet, or already stopped), ignoring the request.',
      );
      return;
    }
    if (this.reobtainScheduled) {
      this.log.debug('A re-obtain of delegation tokens is already scheduled, coalescing.');
      return;
    }
    const now = this.clock.monotonicMs();
    let delay = this.lastReobtainAt === undefined ? 0 : Math.max(0, this.lastReobtainAt + this.cooldownMs - now);
    // Never push an already pending (periodic or retry) cycle later.
    if (this.timer) delay = Math.min(delay, Math.max(0, this.timer.dueAt - now));
    this.reobtainScheduled = true;
    this.log.debug({ delayMs: delay }, 'Re-obtain of delegation tokens requested, scheduling an obtain cycle');
    this.scheduleTimer(delay);
  }

  // ---- Jobs ---------------------------------------------------------------------------------

  async registerJob(jobId: string, jobConfiguration: JobConfiguration, context: JobContext = { principal: 'anonymous' }): Promise<void> {
    if (this.closed) throw tokensRejected('<manager>', new Error('the delegation token manager is closed (the gateway is shutting down)'));
    // A frozen copy: no provider can change the caller's configuration or another provider's view.
    const copy: JobConfiguration = Object.freeze({ ...jobConfiguration });
    const ctx: JobContext = Object.freeze({ principal: context.principal });
    const previouslyRegistered = this.registered.has(jobId);
    let current: string | undefined;
    // Delivery learns about the job before any provider can put it into a payload.
    await this.tellListener('jobRegistering', jobId, () => this.jobListener?.jobRegistering(jobId));
    try {
      for (const [name, p] of this.providers) {
        current = name;
        await p.registerJob?.(jobId, copy, ctx);
        this.unhealthy.delete(name);
      }
      if (!this.registered.has(jobId)) this.registered.set(jobId, this.clock.wallMs());
    } catch (err) {
      const provider = current ?? '<none>';
      this.recordError(`registration of job ${jobId} failed in provider ${provider}: ${describeCause(err)}`);
      if (previouslyRegistered) {
        this.log.error({ jobId, provider, err }, 'Failed to re-register job for provider, keeping the previous registration');
      } else {
        // Roll back on every provider, including those never reached (they must be idempotent).
        await this.unregisterJob(jobId);
        this.log.error({ jobId, provider, err }, 'Failed to register job for provider');
      }
      if (isRefusal(err) || current === undefined) throw tokensRejected(provider, err);
      // Not a refusal: a bug in the provider (or a broken dependency). The client gets a 500 without
      // the provider's words; the log and the status route have them.
      this.unhealthy.set(provider, { at: this.clock.wallMs(), message: describeCause(err) });
      this.log.error({ jobId, provider, err }, 'delegation token provider failed unexpectedly while registering a job; marked unhealthy');
      throw providerFailed(provider, err);
    }
  }

  jobRequestKeys(): readonly string[] {
    return [...new Set([...this.providers.values()].flatMap((p) => p.jobRequestKeys ?? []))];
  }

  /** Never throws: a provider's failure is logged and the job is dropped anyway (no retry). */
  unregisterJob(jobId: string): Promise<void> {
    return this.unregisterJobInternal(jobId, 'unregistered');
  }

  private async unregisterJobInternal(jobId: string, cause: 'unregistered' | 'session-end'): Promise<void> {
    for (const [name, p] of this.providers) {
      try {
        await p.unregisterJob?.(jobId);
      } catch (err) {
        this.log.error({ jobId, provider: name, err }, 'Failed to unregister job for provider');
      }
    }
    this.registered.delete(jobId);
    await this.tellListener('jobUnregistered', jobId, () => this.jobListener?.jobUnregistered(jobId, cause));
  }

  private async tellListener(what: string, jobId: string, call: () => void | Promise<void> | undefined): Promise<void> {
    try {
      await call();
    } catch (err) {
      this.log.error({ jobId, err }, `token job listener failed in ${what}`);
    }
  }

  nextUpdateAt(): number | undefined {
    if (this.cycleRunning) return this.clock.wallMs();
    return this.nextRenewalWall;
  }

  status(): TokenStatus {
    const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
    return {
      enabled: true,
      providers: [...this.providers.keys()].map((serviceName) => {
        const s = this.providerState.get(serviceName) ?? {};
        return {
          serviceName,
          ...(s.lastObtainAt !== undefined ? { lastObtainAt: iso(s.lastObtainAt)! } : {}),
          ...(s.validUntil !== undefined ? { validUntil: iso(s.validUntil)! } : {}),
          ...(s.lastError !== undefined ? { lastError: s.lastError } : {}),
          healthy: !this.unhealthy.has(serviceName),
          ...(this.unhealthy.has(serviceName)
            ? { failure: { at: iso(this.unhealthy.get(serviceName)!.at)!, message: this.unhealthy.get(serviceName)!.message } }
            : {}),
        };
      }),
      ...(this.nextRenewalWall !== undefined ? { nextRenewalAt: iso(this.nextRenewalWall)! } : {}),
      registeredJobs: [...this.registered.keys()],
      ...(this.lastError ? { lastError: { at: iso(this.lastError.at)!, message: this.lastError.message } } : {}),
    };
  }

  // ---- Obtain cycles ------------------------------------------------------------------------

  private enqueueCycle(epoch: number): Promise<void> {
    const run = this.cycleChain
      .then(() => this.cycle(epoch))
      .catch((err: unknown) => {
        this.log.error({ err }, 'tokens update cycle failed unexpectedly');
      });
    this.cycleChain = run;
    return run;
  }

  private isCurrent(epoch: number): boolean {
    return this.running && epoch === this.sessionEpoch;
  }

  private async cycle(epoch: number): Promise<void> {
    if (!this.isCurrent(epoch)) {
      this.log.debug('Skipping tokens update cycle: the manager was stopped or the session changed while waiting.');
      return;
    }
    // The cooldown anchor is the START of the cycle that serves a demand; clearing the flag here
    // (not when the timer fires) keeps requests made while this cycle runs coalesced into one.
    if (this.reobtainScheduled) this.lastReobtainAt = this.clock.monotonicMs();
    this.reobtainScheduled = false;
    this.cycleRunning = true;
    try {
      const { tokens, earliestValidUntil } = await obtainRound(this.providers, this.providerState, this.clock, this.log);
      if (tokens.size > 0) {
        if (!this.isCurrent(epoch)) {
          this.log.info('Manager stopped while the tokens were being obtained, skipping notifications');
          return;
        }
        await notifyReceivers(this.receivers, tokens, this.log);
        const listener = this.listener;
        if (listener && this.isCurrent(epoch)) {
          this.log.info('Notifying listener about new tokens');
          await listener.onNewTokensObtained(toContainer(tokens));
          this.log.info('Listener notified successfully');
        }
      } else {
        this.log.warn('No tokens obtained so skipping notifications');
      }
      if (!this.isCurrent(epoch)) return;
      if (earliestValidUntil !== undefined) {
        this.backoff.succeeded(earliestValidUntil);
        const delay = this.maybeScheduleRenewal(renewalDelay(this.ratio, earliestValidUntil, this.clock.wallMs()), epoch);
        if (delay >= 0) this.log.info({ delayMs: delay }, 'Next tokens update cycle is pending');
        else this.log.info('Tokens update task not rescheduled, the manager is shutting down');
      } else {
        this.log.warn('Tokens update task not started because either no tokens obtained or none of the tokens specified its renewal date');
      }
    } catch (err) {
      this.recordError(`obtain cycle failed: ${describeCause(err)}`);
      if (!this.isCurrent(epoch)) {
        this.log.warn({ err }, 'Failed to update tokens, no retry scheduled because the manager is shutting down');
        return;
      }
      const delay = this.maybeScheduleRenewal(this.backoff.nextDelay(this.clock.wallMs()), epoch);
      this.log.warn({ err, delayMs: delay }, 'Failed to update tokens, will try again');
    } finally {
      this.cycleRunning = false;
    }
  }

  // ---- The one pending timer ----------------------------------------------------------------

  /** Returns the effective delay, or -1 when nothing was scheduled (session over). */
  private maybeScheduleRenewal(delayMs: number, epoch: number): number {
    // Clamp: an expired token (or clock skew) means "now", never "not running".
    const delay = Math.max(0, delayMs);
    if (!this.isCurrent(epoch)) return -1;
    if (this.reobtainScheduled && this.timer) {
      const pending = Math.max(0, this.timer.dueAt - this.clock.monotonicMs());
      if (delay < pending) {
        // A sooner renewal or retry brings the deferred on-demand cycle forward; the flag stays.
        this.scheduleTimer(delay);
        return delay;
      }
      this.log.debug('An on-demand re-obtain is already pending with no greater delay, leaving it in place.');
      return pending;
    }
    this.scheduleTimer(delay);
    return delay;
  }

  private scheduleTimer(delay: number): void {
    this.cancelTimer();
    const generation = this.generation;
    const epoch = this.sessionEpoch;
    try {
      const handle = setLongTimer(this.clock, () => this.onTimer(generation, epoch), delay);
      this.timer = { handle, dueAt: this.clock.monotonicMs() + delay };
      this.nextRenewalWall = this.clock.wallMs() + delay;
    } catch (err) {
      // A failed scheduling attempt must not wedge coalescing; the cooldown anchor is untouched.
      this.reobtainScheduled = false;
      this.log.error({ err }, 'Failed to schedule tokens update task');
      throw err;
    }
  }

  private cancelTimer(): void {
    this.timer?.handle.cancel();
    this.timer = undefined;
    this.generation++;
  }

  private onTimer(generation: number, epoch: number): void {
    if (generation !== this.generation) return;
    this.timer = undefined;
    this.nextRenewalWall = undefined;
    if (!this.isCurrent(epoch)) return;
    void this.enqueueCycle(epoch);
  }

  private recordError(message: string): void {
    this.lastError = { at: this.clock.wallMs(), message };
  }
}
