import type { Logger } from 'pino';
import type { AuditLog, JobAudit } from '../audit/audit-log';
import { type Clock, systemClock } from '../clock';
import { GLOBALLY_TERMINAL, type JobDiscovery } from '../cluster/job-watcher';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import { GatewayError } from '../errors/gateway-error';
import type { ApplicationRuns } from './application-runs';
import type { JobGraphSummary } from './job-graph/job-graph-reader';
import { CLUSTER_DEFAULT_PRINCIPAL, type JobRegistrations } from './job-registrations';

/** `gateway.tokens.unregistered-jobs` (docs/adr/0010-every-running-job-is-registered-or-refused.md). */
export type UnregisteredJobsPolicy = 'register' | 'cancel' | 'ignore';

export interface UnregisteredJobsOptions {
  policy: UnregisteredJobsPolicy;
  registrations: JobRegistrations;
  cluster: JobManagerClient;
  /** `gateway.tokens.cluster-default-configuration`: what such a job is registered with. */
  defaults: Readonly<Record<string, string>>;
  audit: AuditLog;
  log: Logger;
  clock?: Clock;
  /**
   * `gateway.tokens.job-graph.max-size`: under `register`, a POST /v1/jobs job graph up to this
   * size is read and its job registered with its own configuration before the JobManager gets it.
   * Unset: job graphs are not read (their jobs get the cluster default scope once accepted).
   */
  maxGraphBytes?: number;
  /** Flink 2.3 applications the gateway submitted: a later job of one gets its application's registration. */
  applications?: ApplicationRuns;
}

/**
 * Jobs the gateway did not register before they started: job graphs from POST /v1/jobs, and jobs
 * the job watcher finds on the JobManager (submitted past the gateway, or registered before a
 * registration store was lost). Each is registered with the cluster default scope or cancelled,
 * as the policy says, and audited — none runs silently unregistered.
 *
 * A job graph's job is running before the JobManager's answer names it, so the watcher could see
 * it first and register it as discovered; to keep that from happening, a job first seen while a
 * job graph submission that began earlier is still in flight is left for a later read (that
 * submission registers it, or it is discovered once the submission has ended).
 */
export class UnregisteredJobs implements JobDiscovery {
  private readonly clock: Clock;
  /** Job graph submissions in flight: id → monotonic start. */
  private readonly inFlight = new Map<number, number>();
  private nextSubmission = 0;
  /** Unknown jobs: when the watcher first saw each (monotonic). */
  private readonly firstSeen = new Map<string, number>();
  /** Jobs already cancelled or ignored, so a CANCELLING job is not cancelled (or audited) again. */
  private readonly handled = new Set<string>();

  constructor(private readonly opts: UnregisteredJobsOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  get policy(): UnregisteredJobsPolicy {
    return this.opts.policy;
  }

  get graphReading(): { maxBytes: number } | undefined {
    return this.opts.policy === 'register' && this.opts.maxGraphBytes !== undefined ? { maxBytes: this.opts.maxGraphBytes } : undefined;
  }

  /**
   * A POST /v1/jobs job graph was read on its way to the JobManager: its job is registered as a jar
   * run's is, with the cluster's configuration overlaid with the graph's own `jobConfiguration`, for
   * the caller, before the JobManager has the whole body. A provider's refusal rejects (the body is
   * then never completed: the job never exists).
   */
  async jobGraphRead(graph: JobGraphSummary, principal: string, log: Logger): Promise<void> {
    if (graph.skippedKeys.length > 0)
      log.warn(
        { keys: graph.skippedKeys.slice(0, 20) },
        'job graph configuration values of types the gateway does not read as text; providers do not see them',
      );
    await this.opts.registrations.register(graph.jobId, graph.configuration, log, principal, { source: 'job-graph' });
  }

  /** A read graph's submission failed: refused by the JobManager (rolled back), or unknown (left to the job watcher). */
  async jobGraphFailed(graph: JobGraphSummary, ambiguous: boolean, log: Logger): Promise<void> {
    if (ambiguous) this.opts.registrations.submitted(graph.jobId);
    else await this.opts.registrations.rollback(graph.jobId, log);
  }

  /** A POST /v1/jobs begins; call the returned function once it has ended (answered or failed). */
  beginJobGraph(): () => void {
    const id = this.nextSubmission++;
    this.inFlight.set(id, this.clock.monotonicMs());
    return () => this.inFlight.delete(id);
  }

  /**
   * The JobManager accepted a job graph (POST /v1/jobs) and named its job: registers it with the
   * cluster default scope before the answer is relayed. A provider's refusal cancels the job and
   * rejects with GW_TOKENS_JOB_CANCELLED. Under `ignore` only the audit line is written.
   */
  async jobGraphAccepted(jobId: string, submittedBy: string, reqId: string, log: Logger, read?: JobGraphSummary): Promise<void> {
    if (read?.jobId === jobId) {
      this.opts.registrations.submitted(jobId);
      this.opts.audit.job({
        jobId,
        source: 'job-graph',
        principal: submittedBy,
        submittedBy,
        reqId,
        policy: this.opts.policy,
        action: 'registered',
      });
      log.info({ graph: read.graphClass }, "job graph job registered with the graph's own configuration");
      return;
    }
    const base = {
      jobId,
      source: 'job-graph' as const,
      principal: CLUSTER_DEFAULT_PRINCIPAL,
      submittedBy,
      reqId,
      policy: this.opts.policy,
    };
    if (this.opts.policy !== 'register') {
      this.opts.audit.job({ ...base, action: 'ignored' });
      log.warn({ jobId }, 'a job graph job runs without delegation-token registration (gateway.tokens.unregistered-jobs: ignore)');
      return;
    }
    try {
      await this.opts.registrations.adopt(jobId, this.opts.defaults, 'job-graph', log, submittedBy);
    } catch (err) {
      const refusal = err as { provider?: string; cause?: unknown; message?: string };
      const reason = (refusal.cause as Error | undefined)?.message ?? refusal.message ?? String(err);
      const cancelled = await this.cancel(jobId, log);
      this.opts.audit.job({
        ...base,
        action: cancelled ? 'cancelled' : 'failed',
        error: 'GW_TOKENS_JOB_CANCELLED',
        reason: reason.slice(0, 500),
      });
      throw new GatewayError('GW_TOKENS_JOB_CANCELLED', { provider: refusal.provider ?? '<unknown>', jobId, reason });
    }
    this.opts.audit.job({ ...base, action: 'registered' });
    log.info({ jobId }, 'job graph job registered with the cluster default scope');
  }

  /** One job overview read: every running job that is neither registered nor being submitted is handled. */
  async reconcile(states: ReadonlyMap<string, string>): Promise<void> {
    const now = this.clock.monotonicMs();
    for (const jobId of [...this.firstSeen.keys()])
      if (!states.has(jobId) || this.opts.registrations.isKnown(jobId)) this.firstSeen.delete(jobId);
    for (const jobId of [...this.handled]) if (!states.has(jobId) || GLOBALLY_TERMINAL.has(states.get(jobId)!)) this.handled.delete(jobId);
    const oldestSubmission = Math.min(...this.inFlight.values());
    for (const [jobId, state] of states) {
      if (GLOBALLY_TERMINAL.has(state) || this.handled.has(jobId) || this.opts.registrations.isKnown(jobId)) continue;
      const seen = this.firstSeen.get(jobId) ?? now;
      this.firstSeen.set(jobId, seen);
      // A job graph submission that began before this job was seen may be the one that made it.
      if (oldestSubmission <= seen) continue;
      this.firstSeen.delete(jobId);
      // A later job of an application submitted through the gateway is that application's.
      if (await this.opts.applications?.adopt(jobId)) continue;
      await this.discovered(jobId, state);
    }
  }

  private async discovered(jobId: string, state: string): Promise<void> {
    const log = this.opts.log.child({ jobId });
    const base = { jobId, source: 'discovered' as const, principal: CLUSTER_DEFAULT_PRINCIPAL, state, policy: this.opts.policy };
    if (this.opts.policy === 'ignore') {
      this.handled.add(jobId);
      this.opts.audit.job({ ...base, action: 'ignored' });
      log.warn({ state }, 'a job the gateway did not register runs without delegation tokens (gateway.tokens.unregistered-jobs: ignore)');
      return;
    }
    if (this.opts.policy === 'register') {
      try {
        await this.opts.registrations.adopt(jobId, this.opts.defaults, 'discovered', log);
        this.opts.audit.job({ ...base, action: 'registered' });
        log.info({ state }, 'a job the gateway did not register was discovered and registered with the cluster default scope');
        return;
      } catch (err) {
        const reason = ((err as { cause?: Error }).cause?.message ?? (err as Error).message ?? String(err)).slice(0, 500);
        log.warn({ state, reason }, 'a provider refused a discovered job the cluster default scope; cancelling it');
        await this.cancelAudited(jobId, base, 'GW_TOKENS_REJECTED', reason, log);
        return;
      }
    }
    log.warn({ state }, 'a job the gateway did not register was discovered; cancelling it (gateway.tokens.unregistered-jobs: cancel)');
    await this.cancelAudited(jobId, base, 'GW_POLICY_UNREGISTERED_JOBS', 'gateway.tokens.unregistered-jobs: cancel', log);
  }

  private async cancelAudited(jobId: string, base: Omit<JobAudit, 'action'>, error: string, reason: string, log: Logger): Promise<void> {
    const ok = await this.cancel(jobId, log);
    // A cancel that did not go through is tried again at the next read.
    if (ok) this.handled.add(jobId);
    this.opts.audit.job({ ...base, action: ok ? 'cancelled' : 'failed', error, reason });
  }

  /** PATCH /v1/jobs/:jobid?mode=cancel; true once the JobManager accepted it (or the job is gone). */
  private async cancel(jobId: string, log: Logger): Promise<boolean> {
    try {
      const res = await this.opts.cluster.json('PATCH', `/v1/jobs/${jobId}?mode=cancel`, { operation: 'job cancel' });
      if (res.status === 202 || res.status === 200 || res.status === 404) return true;
      log.error({ status: res.status }, 'the JobManager refused to cancel a job the gateway could not register');
    } catch (err) {
      log.error({ err: (err as Error).message }, 'cannot cancel a job the gateway could not register; retrying at the next read');
    }
    return false;
  }
}
