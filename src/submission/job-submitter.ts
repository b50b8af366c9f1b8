import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { isDuplicateJobId, isLeaderUnreachable, isWebSubmitDisabled, summariseFlinkErrors, withFlinkErrors } from '../cluster/flink-errors';
import type { JobManagerClient, JsonResponse } from '../cluster/jobmanager-client';
import { GatewayError } from '../errors/gateway-error';
import type { ClaimResult } from './job-claims';

export interface RunOutcome {
  jobid: string;
  /** Flink 2.3's POST /jars/:jarid/run-application answers with the application's id. */
  applicationid?: string;
  /** Flink 2.3's POST /jars/:jarid/run answers with it too (camel case there). */
  applicationId?: string;
}

/**
 * Which Flink route submits: `run` (every version; the job is submitted before the answer) or
 * `run-application` (Flink 2.3+, FLIP-549: `main()` runs asynchronously as an application; 202).
 * Both go through the same pipeline (policy, fetch, token registration, audit).
 */
export type RunRoute = 'run' | 'run-application';

/** One submission as the JobManager gets it. */
export interface Submission {
  jarId: string;
  jobId: string;
  /** run-application: the application id chosen with the job id, when the request names none. */
  applicationId?: string | undefined;
  /** run-application without a job id: the application is submitted once it lists any job (its ids are Flink's). */
  anyJob?: boolean | undefined;
  /** The body to send: the request's, with the job id and the forwarded configuration. */
  body: Readonly<Record<string, unknown>>;
  query: string;
  /** Whether this request claimed the job id first or is a retry of the request that did. */
  claim: ClaimResult;
}

/**
 * The JobManager's side of a run or plan: the call, and what Flink's answer means. Flink refuses a
 * job id it has (400): a retry of the request that claimed it gets that run's result; anything else
 * under that id is a conflict — never a run reported that did not happen.
 */
export class JobSubmitter {
  constructor(
    private readonly cluster: JobManagerClient,
    /** Without job-id claims (tests), every id counts as this request's. */
    private readonly claimsKept: boolean,
    private readonly now: () => number = Date.now,
  ) {}

  async submit(route: RunRoute, s: Submission, log: Logger): Promise<RunOutcome> {
    return route === 'run' ? this.run(s, log) : this.runApplication(s, log);
  }

  async plan(jarId: string, body: Readonly<Record<string, unknown>> | undefined, query: string, method: 'GET' | 'POST'): Promise<unknown> {
    const res = await this.cluster.json(method, `/v1/jars/${encodeURIComponent(jarId)}/plan${query}`, {
      ...(body ? { body } : {}),
      timeoutMs: this.cluster.runTimeoutMs(),
      operation: 'plan',
    });
    if (res.status === 200) return res.body;
    throw this.failure('plan', res);
  }

  private async run(s: Submission, log: Logger): Promise<RunOutcome> {
    const res = await this.cluster.json('POST', `/v1/jars/${encodeURIComponent(s.jarId)}/run${s.query}`, {
      body: s.body,
      timeoutMs: this.cluster.runTimeoutMs(),
      operation: 'run',
    });
    if (res.status === 200 && typeof (res.body as { jobid?: unknown }).jobid === 'string') {
      log.info({ jarId: s.jarId }, 'job submitted');
      // Flink 2.3 adds the session application's id ({"jobid", "applicationId"}): answered as it is.
      const app = (res.body as { applicationId?: unknown }).applicationId;
      return { jobid: (res.body as { jobid: string }).jobid, ...(typeof app === 'string' ? { applicationId: app } : {}) };
    }
    if (res.status === 400 && (await this.jobExists(s.jobId))) return this.earlierAttempt(s, { jobid: s.jobId }, res, log);
    throw this.failure('run', res, s.jobId);
  }

  /**
   * Flink refused a job id it has: an earlier attempt of this very request reached the JobManager
   * (before a gateway restart, say), whose result `outcome` is; under any other request, a conflict.
   */
  private earlierAttempt(s: Submission, outcome: RunOutcome, res: JsonResponse, log: Logger): RunOutcome {
    if (s.claim !== 'retry' && this.claimsKept) throw withFlinkErrors(new GatewayError('GW_RUN_JOB_ID_CONFLICT', { jobId: s.jobId }), res);
    log.info('JobManager already has this jobId from an earlier attempt of this request; treating the run as accepted');
    return outcome;
  }

  /**
   * Whether the JobManager knows the job (running, or ended and still in its history): `GET
   * /v1/jobs/:id`, 200 or Flink's 404 (its `/status` route answers an unknown job with a 500).
   * Any other answer (unreachable, electing a leader, a proxy's page) throws: nothing may be
   * concluded from it.
   */
  async jobKnown(jobId: string): Promise<boolean> {
    const res = await this.cluster.json('GET', `/v1/jobs/${jobId}`, { operation: 'job details' });
    if (res.status === 200) return true;
    if (!res.notJson && (res.status === 404 || (res.status === 500 && /FlinkJobNotFoundException/.test(JSON.stringify(res.body)))))
      return false;
    // A standby JobManager whose leader is gone answers 500 "… the recipient is unreachable": not
    // now, rather than a failure — 503 with Retry-After, which the client's retry of the run outlasts.
    const flinkMessage = summariseFlinkErrors(res.body);
    if (!res.notJson && res.status === 500 && isLeaderUnreachable(flinkMessage))
      throw withFlinkErrors(new GatewayError('GW_CLUSTER_NOT_READY', { operation: 'job details', flinkMessage }), res);
    throw this.cluster.failure('job details', res);
  }

  /**
   * Flink 2.3's application submission: the same body plus `applicationId`, which the gateway
   * fills in when absent (as it does jobId) so that the answer to a retry is known. Flink answers
   * 202 once the application is accepted; its main() runs afterwards, so a job that fails to start
   * is noticed by the job watcher (it unregisters the job), not by this call.
   */
  private async runApplication(s: Submission, log: Logger): Promise<RunOutcome> {
    const applicationid =
      typeof s.body.applicationId === 'string' ? s.body.applicationId : (s.applicationId ?? randomBytes(16).toString('hex'));
    const res = await this.cluster.json('POST', `/v1/jars/${encodeURIComponent(s.jarId)}/run-application${s.query}`, {
      body: { ...s.body, applicationId: applicationid },
      timeoutMs: this.cluster.runTimeoutMs(),
      operation: 'run-application',
    });
    if (res.status === 202 && typeof (res.body as { applicationid?: unknown }).applicationid === 'string') {
      const accepted = (res.body as { applicationid: string }).applicationid;
      log.info({ jarId: s.jarId, applicationId: accepted }, 'application submitted');
      // main() runs after the 202 and reads the jar: a transient jar (a run by URI) may be deleted
      // only once the job is submitted (its jar then travels by the blob server), as after /run.
      await this.untilApplicationSubmitted(accepted, s.anyJob ? undefined : s.jobId);
      return { jobid: s.jobId, applicationid: accepted };
    }
    // The JobManager has no such route (older than the version the gateway learnt): as Flink answers.
    if (res.status === 404 && !res.notJson && /Not found/.test(summariseFlinkErrors(res.body)))
      throw new GatewayError('GW_ROUTE_NOT_FOUND', { uri: `/v1/jars/${s.jarId}/run-application` });
    if (res.status === 400 && (await this.jobExists(s.jobId))) return this.earlierAttempt(s, { jobid: s.jobId, applicationid }, res, log);
    throw this.failure('run', res, s.jobId);
  }

  /** Waits (bounded by the run timeout) until the application's job exists or the application ended. */
  private async untilApplicationSubmitted(applicationId: string, jobId: string | undefined): Promise<void> {
    const deadline = this.now() + this.cluster.runTimeoutMs();
    while (this.now() < deadline) {
      const r = await this.cluster
        .json('GET', `/v1/applications/${applicationId}`, { operation: 'application status' })
        .catch(() => undefined);
      const app = r?.status === 200 ? (r.body as { status?: string; jobs?: { jid?: string }[] }) : undefined;
      if (
        app &&
        (app.jobs?.some((j) => jobId === undefined || j.jid === jobId) || ['FINISHED', 'FAILED', 'CANCELED'].includes(String(app.status)))
      )
        return;
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  private async jobExists(jobId: string): Promise<boolean> {
    try {
      const res = await this.cluster.json('GET', `/v1/jobs/${jobId}/status`, { operation: 'job status' });
      return res.status === 200;
    } catch {
      return false;
    }
  }

  /**
   * Flink answers 500 when the jar is missing or its manifest names no entry class (the exception
   * escapes its handler synchronously). Those are the client's mistakes, so the gateway answers 400
   * with Flink's message — a deliberate, documented deviation. Flink's refusal of a job id it has
   * (running, or in its job-result store) is 409 GW_RUN_JOB_ID_CONFLICT, as the gateway's own
   * refusal is. Every translation carries the JobManager's own text after the gateway's.
   */
  private failure(operation: 'run' | 'plan', res: JsonResponse, jobId?: string): GatewayError {
    const flinkMessage = summariseFlinkErrors(res.body);
    const translated = (): GatewayError => {
      if (isWebSubmitDisabled(res.status, res.body)) return new GatewayError('GW_CLUSTER_SUBMIT_DISABLED', { operation });
      if (/Jar file .* does not exist/.test(flinkMessage) || res.status === 404)
        return new GatewayError('GW_JAR_NOT_FOUND', { flinkMessage });
      // Only Flink's own handler blames the jar; a plain-text 500 comes from something in between.
      if (res.status === 500 && !res.notJson) return new GatewayError('GW_JAR_INVALID', { flinkMessage });
      if (res.status === 400 && isLeaderUnreachable(flinkMessage))
        return new GatewayError('GW_CLUSTER_NOT_READY', { operation, flinkMessage });
      if (res.status === 400 && jobId !== undefined && isDuplicateJobId(flinkMessage))
        return new GatewayError('GW_RUN_JOB_ID_CONFLICT', { jobId });
      if (res.status === 400) return new GatewayError(operation === 'run' ? 'GW_RUN_REJECTED' : 'GW_PLAN_REJECTED', { flinkMessage });
      return this.cluster.failure(operation, res);
    };
    return withFlinkErrors(translated(), res);
  }
}

/** Errors after which the JobManager may or may not have accepted the run. */
export function isAmbiguous(err: unknown): boolean {
  const e = err as { code?: string; params?: { reason?: unknown } };
  if (e?.code === 'GW_CLUSTER_TIMEOUT') return true;
  // A refused connection never reached the JobManager; a reset one may have.
  return e?.code === 'GW_CLUSTER_UNAVAILABLE' && e.params?.reason !== 'ECONNREFUSED';
}
