import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { type AuditLog, type AuditOutcome, type AuditSubject, outcomeOf, type Verdicts } from '../audit/audit-log';
import { isWebSubmitDisabled, summariseFlinkErrors } from '../cluster/flink-errors';
import type { JobManagerClient, JsonResponse } from '../cluster/jobmanager-client';
import { GatewayError } from '../errors/gateway-error';
import { redactUri } from '../artifacts/uri';
import type { JobRegistrar } from './job-registrations';
import { JOB_JAR_KEY, jobJarPin, type JarRequest } from './run-request';
import { SingleFlight } from './single-flight';
import type { JarEntryPoints } from '../artifacts/jar-entry-points';
import { entryClassProblem } from './entry-class-policy';
import { describeDropped, forwardedConfiguration, PIPELINE_JOB_ID_KEY } from './forwarded-config';
import { type ClaimResult, type JobClaims, runFingerprint } from './job-claims';

/**
 * The seam for remote jars (`user.artifacts.job-jar`): turns a URI into a jar id on the
 * JobManager, and cleans it up afterwards. Implemented by the artifacts feature.
 */
export interface RemoteJarSource {
  prepare(uri: string, ctx: { jobId?: string; sha256?: string; artifacts?: readonly string[]; log: Logger; audit?: AuditSubject }): Promise<PreparedJar>;
}

/** What was fetched, for the audit log. */
export interface ArtifactFacts {
  uri: string;
  sha256: string;
  size: number;
  version?: string;
  verdicts: Verdicts;
}

/** Who asks, for the audit log: the principal, the request id and the permission verdict. */
export interface Caller extends AuditSubject {
  permission?: string;
  /**
   * True once the client went away before its answer: the audit record then says 499 (what the
   * client got: nothing) instead of the status the gateway would have sent. The run goes on.
   */
  clientGone?: () => boolean;
}

export interface PreparedJar {
  jarId: string;
  /** Absolute JobManager path, as Flink's upload answers it. */
  filename: string;
  /** Keys added to the forwarded configuration, e.g. gateway.artifact.{uri,sha256,version}. */
  provenance: Record<string, string>;
  artifact: ArtifactFacts;
  /** The jar's classes and manifest entry class (read from the local copy while it is held). */
  entryPoints(): Promise<JarEntryPoints>;
  /** Removes the transient jar from the JobManager; never throws. */
  release(): Promise<void>;
  /** Keeps the jar on the JobManager (POST /jars/fetch) and only frees the local cache hold. */
  detach(): void;
}

export interface RunServiceOptions {
  cluster: JobManagerClient;
  jarUriEnabled: boolean;
  remoteJars?: RemoteJarSource;
  dedupeRetentionMs: number;
  clock?: import('../clock').Clock;
  /** The job-registration hook (delegation tokens); absent in tests that do not need it. */
  registrations?: JobRegistrar;
  /**
   * `gateway.policy.mode`: in `fetched-only`, runs and plans must name a jar URI or a jar id that
   * POST /jars/fetch registered; an uploaded jar never runs.
   */
  policyMode?: 'open' | 'fetched-only';
  /** Receives one record per run. */
  audit?: AuditLog;
  /** Job-id ownership (job-claims.ts); absent in tests that do not need it (then every id is new). */
  claims?: JobClaims;
  /** Counts submissions by source and outcome. */
  onSubmission?: (source: 'upload' | 'uri', outcome: 'accepted' | 'rejected' | 'failed' | 'deduplicated') => void;
}

export interface RunOutcome {
  jobid: string;
}

/** What one run or plan used, filled in as it goes, for the audit record. */
interface Trace {
  source: 'uri' | 'fetched' | 'upload';
  /** The request's query string (`?entry-class=...` is Flink 1.x's deprecated form of entryClass). */
  query: string;
  jarId: string;
  artifact?: ArtifactFacts;
  verdicts: Verdicts;
}

/** The run and plan pipelines: resolve the jar, apply the policy, gate remote jars, forward to the JobManager. */
export class RunService {
  private readonly flights: SingleFlight<RunOutcome>;
  /**
   * Jar ids POST /jars/fetch registered, with what they can start: in fetched-only mode the only
   * ids that may run by id, and only with one of their own classes.
   */
  private readonly fetchedJars = new Map<string, JarEntryPoints>();
  /**
   * Who put each jar on the JobManager through this gateway (upload or POST /jars/fetch): only that
   * principal may run, plan or delete it. Jars the gateway did not see arrive (before a restart,
   * or uploaded to the JobManager directly) have no owner here and are not restricted.
   */
  private readonly jarOwners = new Map<string, string>();
  /**
   * Uploaded jars that hold classes: a run by URI replaces only a placeholder (the operator's
   * `empty.jar`), never a real jar named in the path.
   */
  private readonly jarsWithClasses = new Set<string>();
  /** Jars POST /jars/fetch left on the JobManager per principal, not deleted yet. */
  private readonly fetchedPerPrincipal = new Map<string, number>();

  constructor(private readonly opts: RunServiceOptions) {
    this.flights = new SingleFlight(opts.dedupeRetentionMs, opts.clock);
  }

  private get fetchedOnly(): boolean {
    return this.opts.policyMode === 'fetched-only';
  }

  async run(jarId: string, request: JarRequest, query: string, log: Logger, caller?: Caller): Promise<{ outcome: RunOutcome; shared: boolean }> {
    const t0 = performance.now();
    // The JobManager always gets a jobId, so that retries can be recognised: the body's, else the
    // one Flink 2.x reads from $internal.pipeline.job-id, else a new one.
    const configured = request.flinkConfiguration[PIPELINE_JOB_ID_KEY]?.trim().toLowerCase();
    const jobId = request.jobId ?? (configured && /^[0-9a-f]{32}$/.test(configured) ? configured : randomBytes(16).toString('hex'));
    request.body.jobId = jobId;
    const jobLog = log.child({ jobId });
    const trace = this.traceFor(jarId, request, caller, query);
    const source = trace.source === 'uri' ? 'uri' : 'upload';
    const principal = caller?.principal ?? 'anonymous';
    const claim: ClaimResult = this.opts.claims?.claim(jobId, principal, runFingerprint(jarId, request, principal, query)) ?? 'new';
    // Not tied to the HTTP request: a client disconnect must not cancel a run in progress.
    let result: { value: RunOutcome; shared: boolean };
    try {
      if (claim === 'conflict') throw new GatewayError('GW_RUN_JOB_ID_CONFLICT', { jobId });
      result = await this.flights.run(jobId, () => this.runOnce(jarId, jobId, request, query, jobLog, trace, claim, caller));
    } catch (err) {
      // A run that provably never started frees its id; one whose outcome is unknown keeps it.
      if (claim === 'new' && !isAmbiguous(err)) this.opts.claims?.release(jobId);
      const status = (err as { status?: number }).status ?? 500;
      this.opts.onSubmission?.(source, status < 500 ? 'rejected' : 'failed');
      this.auditRun('run', trace, caller, t0, { jobId, ...outcomeOf(err) });
      throw err;
    }
    this.opts.onSubmission?.(source, result.shared ? 'deduplicated' : 'accepted');
    this.auditRun('run', trace, caller, t0, { jobId: result.value.jobid, outcome: result.shared ? 'deduplicated' : 'accepted', status: 200 });
    if (result.shared) jobLog.info('run for this jobId already in flight or accepted; returning its result');
    return { outcome: result.value, shared: result.shared };
  }

  private traceFor(jarId: string, request: JarRequest | undefined, caller: Caller | undefined, query: string): Trace {
    const byUri = (request?.flinkConfiguration[JOB_JAR_KEY]?.trim() ?? '') !== '';
    const source = byUri ? 'uri' : this.fetchedJars.has(jarId) ? 'fetched' : 'upload';
    return { source, jarId, query, verdicts: { ...(caller?.permission ? { permission: caller.permission } : {}), policy: this.opts.policyMode ?? 'open' } };
  }

  private auditRun(
    route: 'run' | 'plan',
    trace: Trace,
    caller: Caller | undefined,
    t0: number,
    end: { jobId?: string; outcome: AuditOutcome; status: number; error?: string },
  ): void {
    if (!this.opts.audit || !caller) return;
    const a = trace.artifact;
    const status = caller.clientGone?.() ? CLIENT_GONE : end.status;
    this.opts.audit.submission({
      principal: caller.principal,
      reqId: caller.reqId,
      route,
      source: trace.source,
      ...(a ? { uri: a.uri, sha256: a.sha256, size: a.size, ...(a.version !== undefined ? { version: a.version } : {}) } : {}),
      jarId: trace.jarId,
      ...(end.jobId ? { jobId: end.jobId } : {}),
      verdicts: { ...trace.verdicts, ...(a?.verdicts ?? {}) },
      outcome: end.outcome,
      ...(end.error ? { error: end.error } : {}),
      status,
      durationMs: Math.round(performance.now() - t0),
    });
  }

  private async runOnce(jarId: string, jobId: string, request: JarRequest, query: string, log: Logger, trace: Trace, claim: ClaimResult, caller?: Caller): Promise<RunOutcome> {
    return this.withJar(jarId, request, log, trace, caller, async (effectiveJarId) => {
      const registrar = this.opts.registrations;
      // The configuration as it will be forwarded (for a fetched jar: without the URI key, with
      // the gateway.artifact.* provenance). Registered BEFORE the JobManager sees the job, so a
      // provider's refusal means the job never starts.
      const jobConfiguration = (request.body.flinkConfiguration as Record<string, string> | undefined) ?? request.flinkConfiguration;
      if (registrar) trace.verdicts.tokens = 'refused';
      await registrar?.register(jobId, jobConfiguration, log, caller?.principal ?? 'anonymous');
      if (registrar) trace.verdicts.tokens = 'registered';
      let outcome: RunOutcome;
      try {
        outcome = await this.submit(effectiveJarId, jobId, request, query, claim, log);
      } catch (err) {
        if (registrar) {
          // No answer (timeout, connection lost): the JobManager may have the job. Keep the
          // registration; the job watcher drops it if the job never shows up.
          if (isAmbiguous(err)) registrar.submitted(jobId);
          else {
            await registrar.rollback(jobId, log);
            trace.verdicts.tokens = 'rolled back';
          }
        }
        throw err;
      }
      registrar?.submitted(jobId);
      return outcome;
    });
  }

  private async submit(effectiveJarId: string, jobId: string, request: JarRequest, query: string, claim: ClaimResult, log: Logger): Promise<RunOutcome> {
    const res = await this.opts.cluster.json('POST', `/v1/jars/${encodeURIComponent(effectiveJarId)}/run${query}`, {
      body: request.body,
      timeoutMs: this.opts.cluster.runTimeoutMs(),
      operation: 'run',
    });
    if (res.status === 200 && typeof (res.body as { jobid?: unknown }).jobid === 'string') {
      log.info({ jarId: effectiveJarId }, 'job submitted');
      return { jobid: (res.body as { jobid: string }).jobid };
    }
    if (res.status === 400 && (await this.jobExists(jobId))) {
      // Flink refuses a job id it has. A retry of the very request that claimed it (an earlier
      // attempt reached the JobManager, before a gateway restart, say) gets that run's result;
      // anything else would report a run that did not happen.
      if (claim === 'retry' || !this.opts.claims) {
        log.info('JobManager already has this jobId from an earlier attempt of this request; treating the run as accepted');
        return { jobid: jobId };
      }
      throw new GatewayError('GW_RUN_JOB_ID_CONFLICT', { jobId });
    }
    throw this.runFailure('run', res);
  }

  /** POST /jars/fetch: fetch a jar by URI and register it with the JobManager, like an upload. */
  async fetchJar(uri: string, sha256: string | undefined, log: Logger, caller?: Caller): Promise<{ filename: string; status: 'success' }> {
    if (!this.opts.jarUriEnabled) throw new GatewayError('GW_JAR_URI_DISABLED');
    if (!this.opts.remoteJars) throw new GatewayError('GW_JAR_URI_UNSUPPORTED', { reason: 'no filesystem plugins are configured' });
    const principal = caller?.principal ?? 'anonymous';
    // Like an upload, every fetch leaves a jar on the JobManager's disk until its caller deletes it.
    if ((this.fetchedPerPrincipal.get(principal) ?? 0) >= MAX_FETCHED_JARS_PER_PRINCIPAL) {
      throw new GatewayError('GW_JAR_QUOTA', { principal, limit: MAX_FETCHED_JARS_PER_PRINCIPAL });
    }
    const prepared = await this.opts.remoteJars.prepare(uri.trim(), { ...(sha256 ? { sha256 } : {}), log, ...(caller ? { audit: caller } : {}) });
    let points: JarEntryPoints;
    try {
      points = await prepared.entryPoints();
    } catch (err) {
      await prepared.release();
      throw err;
    }
    // The jar now belongs to the JobManager like an uploaded one: the caller deletes it.
    prepared.detach();
    this.fetchedJars.set(prepared.jarId, points);
    this.jarOwners.set(prepared.jarId, principal);
    this.fetchedPerPrincipal.set(principal, (this.fetchedPerPrincipal.get(principal) ?? 0) + 1);
    return { filename: prepared.filename, status: 'success' };
  }

  /** A jar deleted from the JobManager is no longer a fetched one, nor anyone's. */
  forgetJar(jarId: string): void {
    const owner = this.jarOwners.get(jarId);
    if (this.fetchedJars.delete(jarId) && owner !== undefined) this.fetchedPerPrincipal.set(owner, Math.max(0, (this.fetchedPerPrincipal.get(owner) ?? 1) - 1));
    this.jarOwners.delete(jarId);
    this.jarsWithClasses.delete(jarId);
  }

  /** Records who uploaded `jarId`, and whether it holds classes (so is no placeholder). */
  ownJar(jarId: string, principal: string, hasClasses: boolean): void {
    this.jarOwners.set(jarId, principal);
    if (hasClasses) this.jarsWithClasses.add(jarId);
  }

  /** Throws 403 GW_AUTH_JAR_OWNER when `jarId` belongs to another principal. */
  checkJarOwner(jarId: string, principal: string, action: string): void {
    const owner = this.jarOwners.get(jarId);
    if (owner !== undefined && owner !== principal) throw new GatewayError('GW_AUTH_JAR_OWNER', { jarId, action, principal });
  }

  async plan(jarId: string, request: JarRequest | undefined, query: string, method: 'GET' | 'POST', log: Logger, caller?: Caller): Promise<unknown> {
    const t0 = performance.now();
    const trace = this.traceFor(jarId, request, caller, query);
    const doPlan = async (effectiveJarId: string) => {
      const res = await this.opts.cluster.json(method, `/v1/jars/${encodeURIComponent(effectiveJarId)}/plan${query}`, {
        ...(request ? { body: request.body } : {}),
        timeoutMs: this.opts.cluster.runTimeoutMs(),
        operation: 'plan',
      });
      if (res.status === 200) return res.body;
      throw this.runFailure('plan', res);
    };
    try {
      // Planning runs the jar's main method on the JobManager, so the policy applies as for a run.
      let plan: unknown;
      if (request) plan = await this.withJar(jarId, request, log, trace, caller, doPlan);
      else {
        this.enforcePolicy(trace);
        this.enforceEntryClass(trace, undefined, this.fetchedJars.get(jarId));
        plan = await doPlan(jarId);
      }
      this.auditRun('plan', trace, caller, t0, { outcome: 'accepted', status: 200 });
      return plan;
    } catch (err) {
      this.auditRun('plan', trace, caller, t0, outcomeOf(err));
      throw err;
    }
  }

  /** fetched-only: a jar id runs only when POST /jars/fetch registered it. */
  private enforcePolicy(trace: Trace): void {
    if (!this.fetchedOnly) return;
    if (trace.source === 'upload') {
      trace.verdicts.policy = 'fetched-only: refused an uploaded jar';
      throw new GatewayError('GW_POLICY_FETCHED_ONLY', { what: `running or planning the uploaded jar ${trace.jarId}` });
    }
    trace.verdicts.policy = `fetched-only: ${trace.source === 'uri' ? 'jar URI' : 'jar registered by POST /jars/fetch'}`;
  }

  /** fetched-only: the class a run starts must be one of the vetted jar's own. */
  private enforceEntryClass(trace: Trace, request: JarRequest | undefined, points: JarEntryPoints | undefined): void {
    if (!this.fetchedOnly || trace.source === 'upload') return;
    // Flink takes the body's entryClass, else (1.x) the deprecated ?entry-class= query parameter:
    // each one given must pass, so neither can smuggle in another class.
    const fromBody = typeof request?.body.entryClass === 'string' && request.body.entryClass.trim() !== '' ? request.body.entryClass : undefined;
    const fromQuery = new URLSearchParams(trace.query.replace(/^\?/, '')).getAll('entry-class');
    const candidates = [fromBody, ...fromQuery];
    const problem =
      points === undefined
        ? 'the jar\'s classes are unknown to this gateway'
        : candidates.map((c) => entryClassProblem(c, points)).find((p) => p !== undefined);
    if (problem === undefined) return;
    trace.verdicts.policy = 'fetched-only: refused the entry class';
    throw new GatewayError('GW_POLICY_ENTRY_CLASS', { problem });
  }

  /**
   * The configuration the JobManager gets: the request's, minus what the gateway drops
   * (forwarded-config.ts), plus `extra` (the fetched jar's provenance). Set once, on the body.
   */
  private forward(request: JarRequest, trace: Trace, extra: Record<string, string> = {}): void {
    const forwarded = forwardedConfiguration(request.flinkConfiguration, this.opts.policyMode ?? 'open');
    if (forwarded.dropped.length > 0) trace.verdicts.configuration = describeDropped(forwarded.dropped);
    if (request.body.flinkConfiguration !== undefined || forwarded.dropped.length > 0 || Object.keys(extra).length > 0) {
      request.body.flinkConfiguration = { ...forwarded.config, ...extra };
    }
  }

  /** Resolves the jar to run: the uploaded one, or a fetched one when the request names a URI. */
  private async withJar<T>(jarId: string, request: JarRequest, log: Logger, trace: Trace, caller: Caller | undefined, fn: (jarId: string) => Promise<T>): Promise<T> {
    this.enforcePolicy(trace);
    const uri = request.flinkConfiguration[JOB_JAR_KEY];
    const artifacts = artifactList(request.flinkConfiguration[ARTIFACT_LIST_KEY]);
    if (uri === undefined || uri.trim() === '') {
      if (artifacts.length > 0) {
        throw new GatewayError('GW_REQUEST_MALFORMED', { type: 'JarRunRequestBody', reason: `${ARTIFACT_LIST_KEY} needs ${JOB_JAR_KEY}: the gateway adds artifacts to a jar it fetches, not to an uploaded one` });
      }
      this.enforceEntryClass(trace, request, this.fetchedJars.get(jarId));
      this.forward(request, trace);
      return fn(jarId);
    }
    if (!this.opts.jarUriEnabled) throw new GatewayError('GW_JAR_URI_DISABLED');
    if (!this.opts.remoteJars) throw new GatewayError('GW_JAR_URI_UNSUPPORTED', { reason: 'no filesystem plugins are configured' });
    if (this.jarsWithClasses.has(jarId)) throw new GatewayError('GW_JAR_URI_CONFLICT', { jarId, uri: redactUri(uri.trim()) });
    const pin = jobJarPin(request.flinkConfiguration);
    const prepared = await this.opts.remoteJars.prepare(uri.trim(), {
      ...(request.jobId ? { jobId: request.jobId } : {}),
      ...(pin ? { sha256: pin } : {}),
      ...(artifacts.length > 0 ? { artifacts } : {}),
      log,
      ...(caller ? { audit: { principal: caller.principal, reqId: caller.reqId } } : {}),
    });
    trace.artifact = prepared.artifact;
    trace.jarId = prepared.jarId;
    try {
      if (this.fetchedOnly) this.enforceEntryClass(trace, request, await prepared.entryPoints());
      // Without user.artifacts.* (a future Flink that honours the key must not fetch a second time).
      this.forward(request, trace, prepared.provenance);
      return await fn(prepared.jarId);
    } finally {
      await prepared.release();
    }
  }

  private async jobExists(jobId: string): Promise<boolean> {
    try {
      const res = await this.opts.cluster.json('GET', `/v1/jobs/${jobId}/status`, { operation: 'job status' });
      return res.status === 200;
    } catch {
      return false;
    }
  }

  /**
   * Flink answers 500 when the jar is missing or its manifest names no entry class (the exception
   * escapes its handler synchronously). Those are the client's mistakes, so the gateway answers 400
   * with Flink's message — a deliberate, documented deviation.
   */
  private runFailure(operation: 'run' | 'plan', res: JsonResponse): GatewayError {
    const flinkMessage = summariseFlinkErrors(res.body);
    if (isWebSubmitDisabled(res.status, res.body)) return new GatewayError('GW_CLUSTER_SUBMIT_DISABLED', { operation });
    if (/Jar file .* does not exist/.test(flinkMessage) || res.status === 404) return new GatewayError('GW_JAR_NOT_FOUND', { flinkMessage });
    // Only Flink's own handler blames the jar; a plain-text 500 comes from something in between.
    if (res.status === 500 && !res.notJson) return new GatewayError('GW_JAR_INVALID', { flinkMessage });
    if (res.status === 400) return new GatewayError(operation === 'run' ? 'GW_RUN_REJECTED' : 'GW_PLAN_REJECTED', { flinkMessage });
    return this.opts.cluster.failure(operation, res);
  }
}

/** Flink's application-mode key for extra jars; the gateway makes it work for session-cluster runs by URI. */
export const ARTIFACT_LIST_KEY = 'user.artifacts.artifact-list';
const MAX_ARTIFACTS = 32;

/** `uri1;uri2` (Flink's list syntax), trimmed, at most MAX_ARTIFACTS. */
function artifactList(value: string | undefined): string[] {
  const list = (value ?? '').split(';').map((s) => s.trim()).filter(Boolean);
  if (list.length > MAX_ARTIFACTS) throw new GatewayError('GW_REQUEST_MALFORMED', { type: 'JarRunRequestBody', reason: `${ARTIFACT_LIST_KEY} names ${list.length} artifacts; at most ${MAX_ARTIFACTS}` });
  return list;
}

/** The audit status of a call whose client closed the connection before the answer (nginx's 499). */
const CLIENT_GONE = 499;

/** How many jars POST /jars/fetch may leave on the JobManager per principal before they are deleted. */
export const MAX_FETCHED_JARS_PER_PRINCIPAL = 256;

/** Errors after which the JobManager may or may not have accepted the run. */
function isAmbiguous(err: unknown): boolean {
  const e = err as { code?: string; params?: { reason?: unknown } };
  if (e?.code === 'GW_CLUSTER_TIMEOUT') return true;
  // A refused connection never reached the JobManager; a reset one may have.
  return e?.code === 'GW_CLUSTER_UNAVAILABLE' && e.params?.reason !== 'ECONNREFUSED';
}
