import type { Logger } from 'pino';
import { type Clock, setLongTimer, systemClock, type TimerHandle } from '../clock';
import type { JobManagerClient } from './jobmanager-client';

/** Flink's globally terminal job states. SUSPENDED is not one: the job resumes on a new leader. */
export const GLOBALLY_TERMINAL = new Set(['FINISHED', 'FAILED', 'CANCELED']);

/** `jid → state` from `GET /v1/jobs/overview`; throws when the JobManager is unreachable or answers badly. */
export async function fetchJobStates(cluster: JobManagerClient, timeoutMs?: number): Promise<Map<string, string>> {
  const res = await cluster.json('GET', '/v1/jobs/overview', { operation: 'jobs overview', ...(timeoutMs ? { timeoutMs } : {}) });
  const jobs = (res.body as { jobs?: unknown }).jobs;
  if (res.status !== 200 || !Array.isArray(jobs)) throw cluster.failure('jobs overview', res);
  const out = new Map<string, string>();
  for (const j of jobs as { jid?: unknown; state?: unknown }[]) {
    if (typeof j?.jid === 'string' && typeof j.state === 'string') out.set(j.jid.toLowerCase(), j.state);
  }
  return out;
}

/** What the watcher follows: jobs whose run the JobManager accepted, and how to let them go. */
export interface WatchedJobs {
  watchedJobs(): string[];
  /** Unregisters the job; must not throw. */
  unregister(jobId: string, reason: string): Promise<void>;
  /**
   * The job is gone from the JobManager, or SUSPENDED past the job-leader timeout: its registration
   * ends, but what is needed to register it again if it comes back is kept. Must not throw.
   * Without it, `unregister` is called.
   */
  absent?(jobId: string, reason: string): Promise<void>;
  /** Each successful read, before discovery: jobs that were absent and are listed again. Must not throw. */
  recheckAbsent?(states: ReadonlyMap<string, string>): Promise<void>;
}

/**
 * Told about every job of each successful overview read, registered or not, so that jobs nobody
 * registered are found (docs/adr/0010). Must not throw.
 */
export interface JobDiscovery {
  reconcile(states: ReadonlyMap<string, string>): Promise<void>;
}

export interface JobWatcherOptions {
  cluster: JobManagerClient;
  jobs: WatchedJobs;
  /** With discovery the watcher reads on every interval, even while no job is registered. */
  discovery?: JobDiscovery;
  intervalMs: number;
  maxBackoffMs: number;
  /** Successful reads without the job before it counts as gone. */
  missingReads: number;
  /** …and for at least this long (monotonic). */
  missingGraceMs: number;
  /**
   * A job SUSPENDED this long (Flink's `resourcemanager.job.timeout`, after which its ResourceManager
   * lets the job's leader go and FLINK-40019 unregisters it) has its registration ended. Default: never.
   */
  suspendedTimeoutMs?: number;
  log: Logger;
  clock?: Clock;
}

interface Missing {
  since: number;
  reads: number;
}

/**
 * Follows `/v1/jobs/overview` and unregisters jobs that reached a globally terminal state. A job
 * absent from the overview counts as gone only after `missingReads` successful reads without it
 * spanning `missingGraceMs`: a JobManager that is restarting (or briefly lists nothing) must not
 * strip a running job of its tokens. Failed reads never count; they back off exponentially. With
 * `discovery`, every successful read is also handed over to find jobs nobody registered (ADR 0010).
 */
export class JobWatcher {
  private readonly clock: Clock;
  private readonly missing = new Map<string, Missing>();
  /** Jobs seen SUSPENDED: since when (monotonic). */
  private readonly suspended = new Map<string, number>();
  private timer: TimerHandle | undefined;
  private running = false;
  private polling: Promise<void> | undefined;
  private failures = 0;

  constructor(private readonly opts: JobWatcherOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(this.opts.intervalMs);
  }

  /** Stops polling and waits for a read in flight. */
  async stop(): Promise<void> {
    this.running = false;
    this.timer?.cancel();
    this.timer = undefined;
    await this.polling;
  }

  /** Resolves when no read is in flight (for tests driving the clock by hand). */
  async whenIdle(): Promise<void> {
    await this.polling;
  }

  /** One read; exposed for tests. Returns the delay before the next. */
  async pollOnce(): Promise<number> {
    const watched = this.opts.jobs.watchedJobs();
    for (const jobId of this.missing.keys()) if (!watched.includes(jobId)) this.missing.delete(jobId);
    for (const jobId of this.suspended.keys()) if (!watched.includes(jobId)) this.suspended.delete(jobId);
    if (watched.length === 0 && !this.opts.discovery && !this.opts.jobs.recheckAbsent) {
      this.failures = 0;
      return this.opts.intervalMs;
    }
    let states: Map<string, string>;
    try {
      states = await fetchJobStates(this.opts.cluster);
    } catch (err) {
      this.failures++;
      const delay = Math.min(this.opts.intervalMs * 2 ** Math.min(this.failures, 30), this.opts.maxBackoffMs);
      const fields = { err: (err as Error).message, failures: this.failures, retryInMs: delay };
      if (this.failures === 1) this.opts.log.warn(fields, 'job watcher cannot read the JobManager job overview; registered jobs are kept');
      else this.opts.log.debug(fields, 'job watcher still cannot read the JobManager job overview');
      return delay;
    }
    this.failures = 0;
    const now = this.clock.monotonicMs();
    for (const jobId of watched) {
      const state = states.get(jobId);
      if (state !== undefined) {
        this.missing.delete(jobId);
        if (GLOBALLY_TERMINAL.has(state)) {
          this.suspended.delete(jobId);
          this.opts.log.info({ jobId, state }, 'job reached a globally terminal state; unregistering it');
          await this.opts.jobs.unregister(jobId, `job ${state}`);
        } else if (state === 'SUSPENDED' && this.opts.suspendedTimeoutMs !== undefined) {
          const since = this.suspended.get(jobId) ?? now;
          this.suspended.set(jobId, since);
          if (now - since >= this.opts.suspendedTimeoutMs) {
            this.suspended.delete(jobId);
            this.opts.log.info(
              { jobId, suspendedForMs: Math.round(now - since) },
              "job SUSPENDED past Flink's job-leader timeout (resourcemanager.job.timeout); its registration ends",
            );
            await this.endAbsent(jobId, 'job SUSPENDED past the job-leader timeout');
          }
        } else {
          this.suspended.delete(jobId);
        }
        continue;
      }
      const m = this.missing.get(jobId) ?? { since: now, reads: 0 };
      m.reads++;
      this.missing.set(jobId, m);
      if (m.reads >= this.opts.missingReads && now - m.since >= this.opts.missingGraceMs) {
        this.missing.delete(jobId);
        this.opts.log.info(
          { jobId, reads: m.reads, missingForMs: Math.round(now - m.since) },
          'job is no longer known to the JobManager; unregistering it',
        );
        await this.endAbsent(jobId, 'job missing from the JobManager');
      }
    }
    await this.opts.jobs.recheckAbsent?.(states);
    await this.opts.discovery?.reconcile(states);
    return this.opts.intervalMs;
  }

  private endAbsent(jobId: string, reason: string): Promise<void> {
    this.suspended.delete(jobId);
    return this.opts.jobs.absent ? this.opts.jobs.absent(jobId, reason) : this.opts.jobs.unregister(jobId, reason);
  }

  private schedule(delay: number): void {
    if (!this.running) return;
    this.timer = setLongTimer(
      this.clock,
      () => {
        this.timer = undefined;
        if (!this.running) return;
        this.polling = this.pollOnce()
          .catch((err: unknown) => {
            this.opts.log.error({ err }, 'job watcher poll failed unexpectedly');
            return this.opts.intervalMs;
          })
          .then((next) => {
            this.polling = undefined;
            this.schedule(next);
          });
      },
      delay,
    );
  }
}
