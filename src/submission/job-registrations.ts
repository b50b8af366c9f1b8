import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { GLOBALLY_TERMINAL, type WatchedJobs } from '../cluster/job-watcher';
import { GatewayError } from '../errors/gateway-error';
import { tokensRejected } from '../plugin-kit/registration-error';
import type { JobConfiguration, TokenManager } from '../plugin-kit/token-spi';
import { sortedEntries } from './job-claims';
import type { RegistrationSource, RegistrationStore, StoredRegistration } from './registration-store';
import { type Clock, systemClock, type TimerHandle } from '../clock';

/**
 * The principal of every registration no caller asked for (a job graph, a discovered job): the
 * cluster default scope. Authentication yields only `token:<name>`, `cert:<CN>` and `anonymous`,
 * so no caller can be it; providers' allow-lists may name it (`gateway:cluster-default=<item>`).
 */
export const CLUSTER_DEFAULT_PRINCIPAL = 'gateway:cluster-default';

/** How a registered job came to be registered, for the status route. */
export interface RegisteredJob {
  jobId: string;
  registeredAt: string;
  principal: string;
  source: RegistrationSource;
  submittedBy?: string;
}

/** Keys the gateway adds to a fetched jar's forwarded configuration (see remote-jars.ts). */
export const PROVENANCE_PREFIX = 'gateway.artifact.';

/** How a registration came to be, when not a jar run (`submitted`): a job graph read from POST /v1/jobs, say. */
export interface RegistrationOrigin {
  source: RegistrationSource;
  /** The caller, when the principal is another (the cluster default scope). */
  submittedBy?: string;
}

/** The registration hook as the run pipeline sees it. */
export interface JobRegistrar {
  /**
   * Registers the job with every token provider BEFORE the JobManager is asked to run it. Rejects
   * with GW_TOKENS_REJECTED when a provider refuses (every provider is then rolled back).
   */
  register(
    jobId: string,
    flinkConfiguration: Readonly<Record<string, string>>,
    log: Logger,
    principal?: string,
    origin?: RegistrationOrigin,
  ): Promise<void>;
  /** The JobManager refused the run: undo the registration everywhere. */
  rollback(jobId: string, log: Logger): Promise<void>;
  /** The run reached the JobManager (accepted, or the outcome is unknown): the job watcher may follow it. */
  submitted(jobId: string): void;
  /** Registered, being submitted, or waiting for a re-registration retry. */
  isKnown(jobId: string): boolean;
  /** Ends the job's registration (the JobManager no longer knows the job); must not throw. */
  unregister(jobId: string, reason: string): Promise<void>;
}

export interface JobRegistrationsOptions {
  tokens: TokenManager;
  /** Absent when delegation tokens are disabled: nothing is persisted. */
  store?: RegistrationStore;
  /** Whether a key of a job's configuration holds a secret (`jobSecretRule`: declared sensitive options, Flink's rule). */
  isSensitive: (key: string) => boolean;
  /**
   * The cluster's own Flink configuration (gateway.cluster.flink-conf), which the JobManager merges
   * under every job's: providers see a job's effective configuration, cluster keys + request keys.
   */
  cluster?: Readonly<Record<string, string>>;
  log: Logger;
  wallClock?: () => number;
  /** Timers for the re-registration retries after a restart (injected in tests). */
  clock?: Clock;
  /**
   * Whether this gateway obtains the tokens: always with one replica; in an HA cluster only while
   * its JobManager leads (src/ha/). A gateway that does not registers a job only to let the
   * providers check it (their allow-lists), stores it for the leader's gateway and drops it again.
   */
  active?: () => boolean;
  /**
   * How long the record of a job gone from the JobManager is kept (`gateway.tokens.absent-retention`),
   * so that the same id coming back is registered again with it. Default 24 h.
   */
  absentRetentionMs?: number;
}

/** A stored job whose re-registration at start was refused, retried with backoff. */
export interface PendingRestore {
  jobId: string;
  attempts: number;
  lastError: string;
  /** ISO-8601. */
  nextRetryAt: string;
}

const RESTORE_RETRY_FIRST_MS = 1_000;
/** How long a stored registration whose run has not been answered yet counts as being submitted (the run timeout's default). */
const SUBMITTING_GRACE_MS = 10 * 60_000;
const RESTORE_RETRY_MAX_MS = 5 * 60_000;
const ABSENT_RETENTION_DEFAULT_MS = 24 * 3_600_000;

/** A copy of the job's configuration without any sensitive value: that is all a provider sees or the store keeps. */
export function redactConfiguration(
  config: Readonly<Record<string, string>>,
  isSensitive: (key: string) => boolean,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(config)) if (!isSensitive(k)) out[k] = v;
  return out;
}

function originOf(rec: StoredRegistration): { principal: string; source: RegistrationSource; submittedBy?: string } {
  return {
    principal: rec.principal ?? 'anonymous',
    source: rec.source ?? 'submitted',
    ...(rec.submittedBy ? { submittedBy: rec.submittedBy } : {}),
  };
}

/** Key order does not make two configurations different. */
function canonical(config: Readonly<Record<string, string>>): string {
  return JSON.stringify(sortedEntries(config));
}

/**
 * Job registrations: the token manager's per-job registry plus the persistent store, and what the
 * job watcher follows. A job is "submitting" from its registration until the JobManager answers;
 * the watcher ignores it meanwhile (a run can take minutes, during which the job is not listed).
 */
export class JobRegistrations implements JobRegistrar, WatchedJobs {
  private readonly jobs = new Map<string, number>();
  /** The redacted configuration each registered job was registered with (canonical JSON). */
  private readonly configurations = new Map<string, string>();
  private readonly submitting = new Set<string>();
  /**
   * Jobs a retry is registering again while an earlier attempt's registration stands (its run was
   * accepted, or its outcome is unknown): that attempt may have started the job, so this one's
   * failure must not take the registration away.
   */
  private readonly retrying = new Set<string>();
  private readonly enabled: boolean;
  private readonly now: () => number;
  private readonly clock: Clock;
  /** Running jobs a provider refused to register again at start: retried until it accepts or they end. */
  private readonly pending = new Map<string, PendingRestore & { timer: TimerHandle; rec: StoredRegistration }>();
  /** Who each registered job is registered for and how it came to be (docs/adr/0010). */
  private readonly origins = new Map<string, { principal: string; source: RegistrationSource; submittedBy?: string }>();

  private readonly active: () => boolean;
  /** The attempt id each registration of this process wrote (its rollback removes only that record). */
  private readonly attempts = new Map<string, string>();

  constructor(private readonly opts: JobRegistrationsOptions) {
    this.enabled = opts.tokens.status().enabled;
    this.now = opts.wallClock ?? Date.now;
    this.clock = opts.clock ?? systemClock;
    this.active = opts.active ?? (() => true);
  }

  /** Jobs waiting for a re-registration retry, for the status route and the metrics. */
  pendingRestores(): PendingRestore[] {
    return [...this.pending.values()].map(({ jobId, attempts, lastError, nextRetryAt }) => ({ jobId, attempts, lastError, nextRetryAt }));
  }

  async register(
    jobId: string,
    flinkConfiguration: Readonly<Record<string, string>>,
    log: Logger,
    principal = 'anonymous',
    origin: RegistrationOrigin = { source: 'submitted' },
  ): Promise<void> {
    if (!this.enabled) return;
    const configuration = redactConfiguration({ ...this.opts.cluster, ...flinkConfiguration }, this.opts.isSensitive);
    // An earlier attempt's registration, here or (HA) stored by another replica.
    const earlier = this.jobs.has(jobId) || this.opts.store?.get(jobId) !== undefined;
    // A registration is never changed by a later request: only an identical one (a retry) may
    // register the same id again, so nobody can switch a running job's tokens to theirs.
    const known =
      this.configurations.get(jobId) ?? (this.opts.store?.get(jobId) ? canonical(this.opts.store.get(jobId)!.configuration) : undefined);
    // A job registered with the cluster default scope is not anyone's to take over by resubmitting its id.
    const adopted = (this.origins.get(jobId)?.principal ?? this.opts.store?.get(jobId)?.principal) === CLUSTER_DEFAULT_PRINCIPAL;
    if (adopted || (known !== undefined && known !== canonical(configuration))) {
      log.info('a different request tried to register a job id that is registered already; refused, the registration is unchanged');
      throw new GatewayError('GW_RUN_JOB_ID_CONFLICT', { jobId });
    }
    this.submitting.add(jobId);
    try {
      await this.opts.tokens.registerJob(jobId, configuration as JobConfiguration, { principal });
    } catch (err) {
      this.submitting.delete(jobId);
      const e = err as { code?: string };
      log.info({ err: (err as Error)?.message }, 'delegation-token registration refused the job; it was not started');
      throw e?.code === 'GW_TOKENS_REJECTED' || e?.code === 'GW_TOKENS_PROVIDER_FAILED' ? err : tokensRejected('<unknown>', err);
    }
    const registeredAt = this.jobs.get(jobId) ?? this.now();
    this.jobs.set(jobId, registeredAt);
    this.configurations.set(jobId, canonical(configuration));
    this.origins.set(jobId, { principal, ...origin });
    if (earlier) this.retrying.add(jobId);
    else this.retrying.delete(jobId);
    if (!this.opts.store) return;
    const provenance: Record<string, string> = {};
    for (const [k, v] of Object.entries(configuration)) if (k.startsWith(PROVENANCE_PREFIX)) provenance[k] = v;
    try {
      const attempt = randomUUID();
      this.attempts.set(jobId, attempt);
      const stored = origin.source === 'submitted' ? {} : origin;
      await this.opts.store.put({
        jobId,
        principal,
        configuration,
        provenance,
        registeredAt: new Date(registeredAt).toISOString(),
        attempt,
        ...stored,
        ...(this.opts.store.shared ? { submitted: false } : {}),
      });
    } catch (err) {
      // Without the record a gateway restart would silently strip the job of its tokens: refuse now.
      log.error({ err, store: this.opts.store.where }, 'cannot persist the job registration; the job was not started');
      await this.rollback(jobId, log);
      throw err;
    }
    await this.handOverIfStandby(jobId, log);
  }

  /** A gateway that does not obtain tokens keeps nothing once the registration is stored: the leader's gateway takes it from the store. */
  private async handOverIfStandby(jobId: string, log: Logger): Promise<void> {
    if (this.active()) return;
    this.dropLocal(jobId);
    await this.opts.tokens.unregisterJob(jobId);
    log.info("job registration stored for the leading JobManager's gateway, which obtains its tokens");
  }

  /** Forgets a job here only (no store change, providers told by the caller). */
  private dropLocal(jobId: string): void {
    this.pending.get(jobId)?.timer.cancel();
    this.pending.delete(jobId);
    this.jobs.delete(jobId);
    this.configurations.delete(jobId);
    this.origins.delete(jobId);
    this.retrying.delete(jobId);
  }

  async rollback(jobId: string, log: Logger): Promise<void> {
    if (!this.enabled) return;
    if (this.retrying.has(jobId)) {
      // A refused retry proves nothing about the earlier attempt: leave the job to the watcher,
      // which drops it once the JobManager provably does not have it.
      this.submitted(jobId);
      log.info(
        'run failed, but an earlier run with this jobId may have reached the JobManager; its registration is kept for the job watcher',
      );
      return;
    }
    await this.forget(jobId, log, this.attempts.get(jobId));
    log.info('job registration rolled back');
  }

  submitted(jobId: string): void {
    this.submitting.delete(jobId);
    this.retrying.delete(jobId);
    this.attempts.delete(jobId);
    const rec = this.opts.store?.get(jobId);
    if (rec?.submitted === false) {
      const { submitted: _answered, ...done } = rec;
      this.opts
        .store!.put(done)
        .catch((err: unknown) =>
          this.opts.log.warn(
            { jobId, err: (err as Error).message },
            'cannot mark the stored registration as submitted; the leader follows it once its grace has passed',
          ),
        );
    }
  }

  watchedJobs(): string[] {
    // Jobs waiting for a re-registration retry are followed too, so they are dropped once they end.
    return [...this.jobs.keys(), ...this.pending.keys()].filter((j) => !this.submitting.has(j));
  }

  async unregister(jobId: string, reason: string): Promise<void> {
    const log = this.opts.log.child({ jobId });
    await this.forget(jobId, log);
    log.info({ reason }, 'job unregistered from the delegation-token providers');
  }

  /**
   * The job is gone from the JobManager (or SUSPENDED past the job-leader timeout): its providers
   * unregister it, its stored record stays (marked absent) for `absentRetentionMs`, and the same id
   * listed again is registered again with it (`recheckAbsent`), never as a discovered job.
   */
  async absent(jobId: string, reason: string): Promise<void> {
    const log = this.opts.log.child({ jobId });
    const rec = this.opts.store?.get(jobId);
    this.submitting.delete(jobId);
    this.dropLocal(jobId);
    await this.opts.tokens.unregisterJob(jobId);
    this.attempts.delete(jobId);
    if (!rec) {
      log.info({ reason }, 'job unregistered from the delegation-token providers');
      return;
    }
    await this.markAbsent(rec, log);
    log.info(
      { reason },
      'job unregistered from the delegation-token providers; its stored registration is kept in case the same job comes back',
    );
  }

  private async markAbsent(rec: StoredRegistration, log: Logger): Promise<void> {
    if (rec.absentSince !== undefined) return;
    try {
      await this.opts.store?.put({ ...rec, absentSince: new Date(this.now()).toISOString() });
    } catch (err) {
      log.error({ err, store: this.opts.store?.where }, 'cannot update the job-registration store');
    }
  }

  /**
   * One job overview read (before discovery): an absent job listed again and not terminal is
   * registered again from its stored record; one that ended, or has been absent longer than the
   * retention, is dropped from the store.
   */
  async recheckAbsent(states: ReadonlyMap<string, string>): Promise<void> {
    const store = this.opts.store;
    if (!this.enabled || !store || !this.active()) return;
    const retention = this.opts.absentRetentionMs ?? ABSENT_RETENTION_DEFAULT_MS;
    for (const rec of store.list()) {
      if (rec.absentSince === undefined || this.jobs.has(rec.jobId) || this.pending.has(rec.jobId)) continue;
      const log = this.opts.log.child({ jobId: rec.jobId });
      const state = states.get(rec.jobId);
      if (state !== undefined && !GLOBALLY_TERMINAL.has(state) && state !== 'SUSPENDED') {
        await this.comeBack(rec, state, log);
      } else if ((state !== undefined && GLOBALLY_TERMINAL.has(state)) || this.now() - Date.parse(rec.absentSince) >= retention) {
        await this.forget(rec.jobId, log);
        log.info({ state: state ?? 'unknown to the JobManager' }, 'stored registration of an absent job dropped');
      }
    }
  }

  private async comeBack(rec: StoredRegistration, state: string, log: Logger): Promise<void> {
    const { absentSince: _gone, ...present } = rec;
    try {
      await this.registerStored(present);
      log.info({ state, absentSince: rec.absentSince }, 'a job that was gone is back; registered again from its stored registration');
    } catch (err) {
      log.error(
        { err: (err as Error)?.message },
        'a job that came back could not be registered again (a provider refused it); retrying with backoff',
      );
      this.scheduleRestore(present, 1, (err as Error)?.message ?? String(err));
    }
    try {
      await this.opts.store?.put(present);
    } catch (err) {
      log.error({ err, store: this.opts.store?.where }, 'cannot update the job-registration store');
    }
  }

  /** Registered jobs: when, for whom and how they came to be registered, for the status route. */
  list(): RegisteredJob[] {
    return [...this.jobs].map(([jobId, at]) => ({
      jobId,
      registeredAt: new Date(at).toISOString(),
      principal: 'anonymous',
      source: 'submitted',
      ...this.origins.get(jobId),
    }));
  }

  /** Registered, being submitted through the gateway, or waiting for a re-registration retry. */
  isKnown(jobId: string): boolean {
    // HA: a job another replica registered is known before this gateway has registered it from the
    // store (the watch may lag the job's start): never "discovered", never cancelled as unregistered.
    return (
      this.jobs.has(jobId) ||
      this.submitting.has(jobId) ||
      this.pending.has(jobId) ||
      (this.opts.store?.shared === true && this.opts.store.get(jobId) !== undefined)
    );
  }

  /**
   * Registers a job that is already running and that no caller registered (a job graph from
   * POST /v1/jobs, or one the job watcher found): under the cluster default principal, with the
   * cluster default configuration, redacted like any registration. Rejects like `register` when a
   * provider refuses (every provider is then rolled back); the job is followed by the watcher at once.
   * A store that cannot be written is logged, not fatal: the job runs already, and a restarted
   * gateway would discover it again.
   */
  async adopt(
    jobId: string,
    defaults: Readonly<Record<string, string>>,
    source: 'job-graph' | 'discovered',
    log: Logger,
    submittedBy?: string,
  ): Promise<void> {
    if (!this.enabled || this.isKnown(jobId)) return;
    const configuration = redactConfiguration({ ...this.opts.cluster, ...defaults }, this.opts.isSensitive);
    await this.opts.tokens.registerJob(jobId, configuration as JobConfiguration, { principal: CLUSTER_DEFAULT_PRINCIPAL });
    const registeredAt = this.now();
    const origin = { principal: CLUSTER_DEFAULT_PRINCIPAL, source, ...(submittedBy ? { submittedBy } : {}) };
    this.jobs.set(jobId, registeredAt);
    this.configurations.set(jobId, canonical(configuration));
    this.origins.set(jobId, origin);
    try {
      await this.opts.store?.put({ jobId, configuration, provenance: {}, registeredAt: new Date(registeredAt).toISOString(), ...origin });
    } catch (err) {
      log.error(
        { err, store: this.opts.store?.where },
        'cannot persist the registration of a job the gateway did not submit; it stays registered (a restart discovers it again)',
      );
      return;
    }
    await this.handOverIfStandby(jobId, log);
  }

  /**
   * At gateway start: registers again every stored job the JobManager still runs; drops the ones
   * that ended or that it no longer knows. When the JobManager cannot be read, every stored job is
   * registered again and the job watcher drops the ended ones later (an unreachable JobManager
   * must not cost a running job its tokens).
   */
  async restore(readStates: () => Promise<Map<string, string>>): Promise<void> {
    const store = this.opts.store;
    if (!this.enabled || !store) return;
    const stored = store.list();
    if (stored.length === 0) return;
    let states: Map<string, string> | undefined;
    try {
      states = await readStates();
    } catch (err) {
      this.opts.log.warn(
        { err: (err as Error).message, jobs: stored.length },
        'cannot read the JobManager job overview at start; registering every stored job again',
      );
    }
    for (const rec of stored) {
      const log = this.opts.log.child({ jobId: rec.jobId });
      const state = states?.get(rec.jobId);
      // Another replica may be submitting it right now (HA): not listed yet is not gone yet.
      const beingSubmitted =
        store.shared && rec.submitted === false && this.now() - Date.parse(rec.registeredAt) < SUBMITTING_GRACE_MS && state === undefined;
      if (states && !beingSubmitted && state !== undefined && GLOBALLY_TERMINAL.has(state)) {
        // Providers may hold state of the previous process (files, say): let them clean it up.
        await this.forget(rec.jobId, log);
        log.info({ state }, 'stored job registration dropped: the job ended');
        continue;
      }
      if (rec.absentSince !== undefined) {
        // Gone before this start: registered again only if it is listed again (else the job watcher's
        // recheckAbsent keeps looking until the retention ends).
        if (state !== undefined && !GLOBALLY_TERMINAL.has(state) && state !== 'SUSPENDED') await this.comeBack(rec, state, log);
        continue;
      }
      if (states && !beingSubmitted && state === undefined) {
        // Not listed (a JobManager still recovering its jobs, or the job is gone): kept, marked
        // absent; the job watcher registers it again if the same id is listed again.
        await this.opts.tokens.unregisterJob(rec.jobId);
        await this.markAbsent(rec, log);
        log.info('stored job not listed by the JobManager; its registration is kept in case the job comes back');
        continue;
      }
      try {
        await this.registerStored(rec);
        if (beingSubmitted) this.submitting.add(rec.jobId);
        log.info(
          { state: state ?? (beingSubmitted ? 'being submitted' : 'unknown (JobManager unreachable)') },
          'job registered again from the store',
        );
      } catch (err) {
        // Not dropped: the job is running and needs its tokens. Retried with backoff until a provider
        // accepts it or the job ends (the job watcher follows it meanwhile); visible on the status route.
        log.error(
          { err: (err as Error)?.message },
          'a running job could not be registered again (a provider refused it); retrying with backoff',
        );
        this.scheduleRestore(rec, 1, (err as Error)?.message ?? String(err));
      }
    }
  }

  /**
   * HA, on the leading replica's gateway: a registration another replica stored (or changed).
   * Registered here, where the tokens are obtained; one whose run is unanswered is not followed by
   * the job watcher yet. A provider that refuses it here (the replicas' configurations differ) is
   * retried with backoff, as a refused restore is.
   */
  async sharedStored(rec: StoredRegistration): Promise<void> {
    if (!this.enabled || !this.active()) return;
    if (rec.absentSince !== undefined) {
      // Another replica found the job gone: it is no longer registered anywhere until it comes back.
      if (this.jobs.has(rec.jobId)) {
        this.dropLocal(rec.jobId);
        await this.opts.tokens.unregisterJob(rec.jobId);
      }
      return;
    }
    if (rec.submitted !== false) this.submitting.delete(rec.jobId);
    if (this.jobs.has(rec.jobId) || this.pending.has(rec.jobId)) return;
    const log = this.opts.log.child({ jobId: rec.jobId });
    if (rec.submitted === false) this.submitting.add(rec.jobId);
    try {
      await this.registerStored(rec);
      log.info('job registered from the shared store (another replica accepted its run)');
    } catch (err) {
      log.error(
        { err: (err as Error)?.message },
        'a job another replica registered was refused here (do the replicas share one configuration?); retrying with backoff',
      );
      this.scheduleRestore(rec, 1, (err as Error)?.message ?? String(err));
    }
  }

  /** HA: a stored registration was removed (its run was rolled back, or the job ended): dropped here, the store is not touched. */
  async sharedRemoved(jobId: string): Promise<void> {
    if (!this.jobs.has(jobId) && !this.pending.has(jobId)) return;
    this.submitting.delete(jobId);
    this.dropLocal(jobId);
    await this.opts.tokens.unregisterJob(jobId);
    this.opts.log.child({ jobId }).info('job unregistered: its shared registration was removed');
  }

  /** HA: this gateway stops obtaining tokens (its JobManager lost the leadership); the store keeps every registration. */
  deactivate(): void {
    for (const jobId of [...this.jobs.keys(), ...this.pending.keys()]) this.dropLocal(jobId);
    this.submitting.clear();
  }

  /** Registers a stored job with the providers under its stored principal, and follows it here (restore, retry, HA). */
  private async registerStored(rec: StoredRegistration): Promise<void> {
    await this.opts.tokens.registerJob(rec.jobId, rec.configuration, { principal: rec.principal ?? 'anonymous' });
    const at = Date.parse(rec.registeredAt);
    this.jobs.set(rec.jobId, Number.isFinite(at) ? at : this.now());
    this.configurations.set(rec.jobId, canonical(rec.configuration));
    this.origins.set(rec.jobId, originOf(rec));
  }

  private scheduleRestore(rec: StoredRegistration, attempt: number, lastError: string): void {
    const delay = Math.min(RESTORE_RETRY_FIRST_MS * 2 ** (attempt - 1), RESTORE_RETRY_MAX_MS);
    const timer = this.clock.setTimer(() => void this.retryRestore(rec, attempt), delay);
    this.pending.set(rec.jobId, {
      jobId: rec.jobId,
      attempts: attempt,
      lastError: lastError.slice(0, 500),
      nextRetryAt: new Date(this.clock.wallMs() + delay).toISOString(),
      timer,
      rec,
    });
  }

  private async retryRestore(rec: StoredRegistration, attempt: number): Promise<void> {
    if (!this.pending.has(rec.jobId)) return; // the job ended meanwhile
    const log = this.opts.log.child({ jobId: rec.jobId });
    try {
      await this.registerStored(rec);
      this.pending.delete(rec.jobId);
      log.info({ attempts: attempt + 1 }, 'job registered again from the store after retrying');
    } catch (err) {
      if (!this.pending.has(rec.jobId)) return;
      log.warn({ err: (err as Error)?.message, attempts: attempt + 1 }, 'a running job still could not be registered again; retrying');
      this.scheduleRestore(rec, attempt + 1, (err as Error)?.message ?? String(err));
    }
  }

  /** With `attempt` (a rollback), the stored record goes only if that attempt wrote it. */
  private async forget(jobId: string, log: Logger, attempt?: string): Promise<void> {
    this.submitting.delete(jobId);
    this.dropLocal(jobId);
    await this.opts.tokens.unregisterJob(jobId);
    await this.safeRemove(jobId, log, attempt);
    this.attempts.delete(jobId);
  }

  private async safeRemove(jobId: string, log: Logger, attempt?: string): Promise<void> {
    try {
      await this.opts.store?.remove(jobId, attempt);
    } catch (err) {
      log.error({ err, store: this.opts.store?.where }, 'cannot update the job-registration store');
    }
  }
}
