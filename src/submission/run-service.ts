import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock';
import { type AuditLog, type AuditOutcome, type AuditSubject, outcomeOf } from '../audit/audit-log';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { ApplicationIds, ApplicationRuns } from './application-runs';
import { GatewayError } from '../errors/gateway-error';
import { redactUri } from '../plugin-kit/uri';
import type { JarEntryPoints } from '../artifacts/jar-entry-points';
import { describeDropped, forwardedConfiguration, PIPELINE_JOB_ID_KEY } from './forwarded-config';
import { JarBook } from './jar-book';
import { isBudgetRefusal, JarBudget, type JarBudgetLimits, type JarReservation } from './jar-budget';
import { type ClaimResult, type JobClaimBook, runFingerprint } from './job-claims';
import type { JobRegistrar } from './job-registrations';
import { isAmbiguous, JobSubmitter, type RunOutcome, type RunRoute } from './job-submitter';
import type { PreparedJar, RemoteJarSource } from './remote-jars';
import { JOB_JAR_KEY, jobJarPin, type JarRequest } from './run-request';
import { RunPolicy, type Trace } from './run-policy';
import { SingleFlight } from './single-flight';

export type { RunOutcome, RunRoute } from './job-submitter';
export type { ArtifactFacts, PreparedJar, RemoteJarSource } from './remote-jars';

/** Who asks, for the audit log: the principal, the request id and the permission verdict. */
export interface Caller extends AuditSubject {
  permission?: string;
  /**
   * True once the client went away before its answer: the audit record then says 499 (what the
   * client got: nothing) instead of the status the gateway would have sent. The run goes on.
   */
  clientGone?: () => boolean;
}

export interface RunServiceOptions {
  cluster: JobManagerClient;
  jarUriEnabled: boolean;
  remoteJars?: RemoteJarSource;
  dedupeRetentionMs: number;
  clock?: Clock;
  /** The job-registration hook (delegation tokens); absent in tests that do not need it. */
  registrations?: JobRegistrar;
  /** `gateway.policy.mode` (run-policy.ts). */
  policyMode?: 'open' | 'fetched-only';
  /** Receives one record per run. */
  audit?: AuditLog;
  /** Job-id ownership (job-claims.ts); absent in tests that do not need it (then every id is new). */
  claims?: JobClaimBook;
  /** What jars left on the JobManager may take (gateway.jars.*); unbounded when absent (tests that do not need it). */
  jarBudget?: JarBudgetLimits;
  /** gateway.policy.fetched-only.max-upload-size: in fetched-only mode an upload can only be a placeholder this small. */
  placeholderMaxBytes?: number;
  /** Flink 2.3 applications: their job ids, later jobs and transient jars (application-runs.ts). */
  applications?: ApplicationRuns;
  /** Counts submissions by source and outcome. */
  onSubmission?: (source: 'upload' | 'uri', outcome: 'accepted' | 'rejected' | 'failed' | 'deduplicated') => void;
}

/** One run of an uploaded or fetched jar (`POST /jars/:jarid/run`, `/run-application`). */
export interface RunRequest {
  jarId: string;
  request: JarRequest;
  /** The request's query string, forwarded to the JobManager as it came. */
  query: string;
  log: Logger;
  /** The authenticated caller; absent when authentication is off. */
  caller?: Caller | undefined;
  /** Which route asked (default `run`). */
  route?: RunRoute;
}

/** One plan (`GET`/`POST /jars/:jarid/plan`): a run's inputs without a job id, the body optional on GET. */
export interface PlanRequest {
  jarId: string;
  request: JarRequest | undefined;
  query: string;
  method: 'GET' | 'POST';
  log: Logger;
  caller?: Caller | undefined;
}

/**
 * The jar a run or plan uses and the body the JobManager gets for it — built from the request,
 * never written back into it — held until `release()`.
 */
interface ResolvedJar {
  jarId: string;
  /** The request's body with the forwarded configuration (and, for a run, the job id). */
  body: Record<string, unknown>;
  /** The configuration the JobManager gets: what is registered with the token providers. */
  configuration: Record<string, string>;
  release(): Promise<void>;
}

/**
 * Runs and plans, in this order:
 *   job id → claim → (one flight per job id) → policy → jar: the uploaded one, or fetched by URI and
 *   handed to the JobManager (remote-jars.ts) → register with the token providers → submit
 *   (job-submitter.ts) → release the transient jar → audit.
 */
export class RunService {
  private readonly flights: SingleFlight<RunOutcome>;
  /** Per job id, the tail of the requests deciding how to answer (see `exclusive`). */
  private readonly gates = new Map<string, Promise<void>>();
  private readonly jars = new JarBook();
  private readonly budget: JarBudget;
  /** The one listing in flight that refreshes which kept jars the JobManager still has. */
  private refreshing: Promise<void> | undefined;
  private readonly policy: RunPolicy;
  private readonly submitter: JobSubmitter;

  constructor(private readonly opts: RunServiceOptions) {
    this.flights = new SingleFlight(opts.dedupeRetentionMs, opts.clock);
    this.policy = new RunPolicy(opts.policyMode ?? 'open');
    this.budget = new JarBudget(
      opts.jarBudget ?? { maxCount: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER, maxTotalBytes: Number.MAX_SAFE_INTEGER },
    );
    this.submitter = new JobSubmitter(opts.cluster, opts.claims !== undefined, opts.clock ? () => opts.clock!.monotonicMs() : undefined);
  }

  async run(r: RunRequest): Promise<{ outcome: RunOutcome; shared: boolean }> {
    const { jarId, request, query, log, caller, route = 'run' } = r;
    const t0 = performance.now();
    const ids =
      route === 'run-application'
        ? await this.opts.applications?.idsFor({
            jobId: requestedJobId(request),
            applicationId: request.body.applicationId as string | undefined,
          })
        : undefined;
    const jobId = ids?.jobId ?? jobIdFor(request);
    const jobLog = log.child({ jobId });
    const trace = this.traceFor(jarId, request, caller, query);
    const source = trace.source === 'uri' ? 'uri' : 'upload';
    const principal = caller?.principal ?? 'anonymous';
    const fingerprint = runFingerprint(jarId, request, principal, query, route, this.jars.digestOf(jarId));
    let claim: ClaimResult | undefined;
    // Not tied to the HTTP request: a client disconnect must not cancel a run in progress.
    let result: { value: RunOutcome; shared: boolean };
    try {
      // One request at a time per job id decides how to answer (claim, memory, the JobManager's
      // view) and starts or joins the flight; the flight itself is shared, never serialised.
      const flight = await this.exclusive(jobId, async () => {
        const claimed = await this.decide(jobId, principal, fingerprint, trace, jobLog);
        claim = claimed;
        if (claimed === 'conflict') throw new GatewayError('GW_RUN_JOB_ID_CONFLICT', { jobId });
        return {
          settled: this.flights.run(jobId, () =>
            this.runOnce({
              jarId,
              jobId,
              applicationId: ids?.applicationId,
              idRule: ids?.rule,
              request,
              query,
              log: jobLog,
              trace,
              claim: claimed,
              caller,
              route,
            }),
          ),
        };
      });
      result = await flight.settled;
    } catch (err) {
      // A run that provably never started frees its id; one whose outcome is unknown keeps it.
      if (claim === 'new' && !isAmbiguous(err)) await this.releaseClaim(jobId, jobLog);
      const status = (err as { status?: number }).status ?? 500;
      this.opts.onSubmission?.(source, status < 500 ? 'rejected' : 'failed');
      this.auditRun(route, trace, caller, t0, { jobId, ...outcomeOf(err) });
      throw err;
    }
    this.opts.onSubmission?.(source, result.shared ? 'deduplicated' : 'accepted');
    this.auditRun(route, trace, caller, t0, {
      jobId: result.value.jobid,
      outcome: result.shared ? 'deduplicated' : 'accepted',
      status: route === 'run' ? 200 : 202,
    });
    if (result.shared) jobLog.info('run for this jobId already in flight or accepted; returning its result');
    return { outcome: result.value, shared: result.shared };
  }

  /**
   * The retry rule (job-claims.ts): this request's claim on the job id; a remembered outcome or
   * claim answers only while the JobManager still knows the job. When it does not (it restarted
   * without HA, the cluster was recreated, the job expired from its history), the memory, the claim
   * and the registration end here and the run goes to the JobManager as a new run, where Flink's
   * own answer decides (its refusal of an id it still holds is a 409, never a 200). A run in flight
   * in this process is joined without asking: its job may not exist yet.
   */
  private async decide(jobId: string, principal: string, fingerprint: string, trace: Trace, log: Logger): Promise<ClaimResult> {
    const claimed = await this.claimOf(jobId, principal, fingerprint);
    if (this.flights.inFlight(jobId) || (claimed === 'new' && !this.flights.remembers(jobId))) return claimed;
    let known: boolean;
    try {
      known = await this.submitter.jobKnown(jobId);
    } catch (err) {
      // Nothing can be concluded, and nothing ran: a claim this request just made is freed again.
      if (claimed === 'new') await this.releaseClaim(jobId, log);
      throw err;
    }
    if (known) return claimed;
    this.flights.forget(jobId);
    const registrar = this.opts.registrations;
    if (registrar?.isKnown(jobId)) await registrar.unregister(jobId, 'the JobManager no longer knows the job; a new run takes its id');
    log.info(
      { earlier: claimed === 'new' ? 'remembered result' : `${claimed} claim` },
      'the JobManager no longer knows this jobId; its earlier run is forgotten and this one goes to the JobManager as a new run',
    );
    trace.verdicts.jobId = 'earlier run gone from the JobManager';
    if (claimed === 'new') return claimed;
    try {
      await this.opts.claims?.release(jobId);
    } catch (err) {
      throw storeUnavailable('job id claim', err);
    }
    return this.claimOf(jobId, principal, fingerprint);
  }

  /** Runs `fn` after every earlier `exclusive` call for `key` has settled. */
  private async exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.gates.get(key);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const chained = (before ?? Promise.resolve()).then(() => gate);
    this.gates.set(key, chained);
    await before;
    try {
      return await fn();
    } finally {
      open();
      if (this.gates.get(key) === chained) this.gates.delete(key);
    }
  }

  /** The job id's claim; a shared store that cannot be reached is a 503 (nothing ran). */
  private async claimOf(jobId: string, principal: string, fingerprint: string): Promise<ClaimResult> {
    if (!this.opts.claims) return 'new';
    try {
      return await this.opts.claims.claim(jobId, principal, fingerprint);
    } catch (err) {
      throw storeUnavailable('job id claim', err);
    }
  }

  private async releaseClaim(jobId: string, log: Logger): Promise<void> {
    try {
      await this.opts.claims?.release(jobId);
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'cannot release the job id claim; it ends when the JobManager no longer knows the job');
    }
  }

  /** One run: the jar, the registration BEFORE the JobManager sees the job, the submission, the release. */
  private async runOnce(r: RunContext): Promise<RunOutcome> {
    // An application whose job ids Flink chooses is sent without one (application-runs.ts).
    const provisional = r.idRule === 'application';
    const jar = await this.resolveJar(r.jarId, r.request, r.log, r.trace, r.caller, provisional ? undefined : r.jobId);
    // An application's main() may load classes from the jar until the application ends.
    let releasedByApplication = false;
    try {
      const registrar = this.opts.registrations;
      // A provider's refusal means the job never starts.
      if (registrar) r.trace.verdicts.tokens = 'refused';
      await registrar?.register(r.jobId, jar.configuration, r.log, r.caller?.principal ?? 'anonymous');
      if (registrar) r.trace.verdicts.tokens = 'registered';
      try {
        const outcome = await this.submitter.submit(
          r.route,
          {
            jarId: jar.jarId,
            jobId: r.jobId,
            applicationId: r.applicationId,
            body: jar.body,
            query: r.query,
            claim: r.claim,
            anyJob: provisional,
          },
          r.log,
        );
        registrar?.submitted(r.jobId);
        if (outcome.applicationid && this.opts.applications) {
          this.opts.applications.track({
            applicationId: outcome.applicationid,
            configuration: jar.configuration,
            principal: r.caller?.principal ?? 'anonymous',
            release: jar.release,
            log: r.log,
            provisional,
          });
          releasedByApplication = true;
        }
        return outcome;
      } catch (err) {
        // No answer (timeout, connection lost): the JobManager may have the job. Keep the
        // registration; the job watcher drops it if the job never shows up.
        if (registrar && isAmbiguous(err)) registrar.submitted(r.jobId);
        else if (registrar) {
          await registrar.rollback(r.jobId, r.log);
          r.trace.verdicts.tokens = 'rolled back';
        }
        throw err;
      }
    } finally {
      if (!releasedByApplication) await jar.release();
    }
  }

  async plan(r: PlanRequest): Promise<unknown> {
    const { jarId, request, query, method, log, caller } = r;
    const t0 = performance.now();
    const trace = this.traceFor(jarId, request, caller, query);
    try {
      // Planning runs the jar's main method on the JobManager, so the policy applies as for a run.
      let plan: unknown;
      if (request) {
        const jar = await this.resolveJar(jarId, request, log, trace, caller);
        try {
          plan = await this.submitter.plan(jar.jarId, jar.body, query, method);
        } finally {
          await jar.release();
        }
      } else {
        this.policy.checkSource(trace);
        this.policy.checkEntryClass(trace, undefined, this.jars.entryPointsOf(jarId));
        plan = await this.submitter.plan(jarId, undefined, query, method);
      }
      this.auditRun('plan', trace, caller, t0, { outcome: 'accepted', status: 200 });
      return plan;
    } catch (err) {
      this.auditRun('plan', trace, caller, t0, outcomeOf(err));
      throw err;
    }
  }

  /**
   * The jar to run and the body to send: the uploaded jar, or — when the request names
   * `user.artifacts.job-jar` — the jar fetched from that URI (with its artifacts) and handed to the
   * JobManager, in place of the placeholder in the path.
   */
  private async resolveJar(
    jarId: string,
    request: JarRequest,
    log: Logger,
    trace: Trace,
    caller: Caller | undefined,
    jobId?: string,
  ): Promise<ResolvedJar> {
    this.policy.checkSource(trace);
    const uri = request.flinkConfiguration[JOB_JAR_KEY]?.trim() ?? '';
    if (uri === '') {
      if ((request.flinkConfiguration[ARTIFACT_LIST_KEY]?.trim() ?? '') !== '') {
        // Flink ignores the key in session mode, and the operator merges the cluster's whole
        // configuration into every run: refusing it would fail every run of a cluster that sets it.
        trace.verdicts.artifacts = `ignored: ${ARTIFACT_LIST_KEY} without ${JOB_JAR_KEY} (the gateway adds artifacts only to a jar it fetches)`;
        log.warn(
          `${ARTIFACT_LIST_KEY} is set without ${JOB_JAR_KEY}; ignored (not forwarded): the gateway adds artifacts only to a jar it fetches by URI`,
        );
      }
      this.policy.checkEntryClass(trace, request.body, this.jars.entryPointsOf(jarId));
      return { jarId, ...this.forwarded(request, trace, jobId), release: async () => undefined };
    }
    if (!this.opts.jarUriEnabled) throw new GatewayError('GW_JAR_URI_DISABLED');
    if (!this.opts.remoteJars) throw new GatewayError('GW_JAR_URI_UNSUPPORTED', { reason: 'no filesystem plugins are configured' });
    if (this.jars.hasClasses(jarId)) throw new GatewayError('GW_JAR_URI_CONFLICT', { jarId, uri: redactUri(uri) });
    const artifacts = artifactList(request.flinkConfiguration[ARTIFACT_LIST_KEY]);
    const pin = jobJarPin(request.flinkConfiguration);
    // The transient jar is no one's to keep, but it takes the upload directory's disk while it runs.
    const transient = this.budget.reserve(undefined);
    let prepared: PreparedJar;
    try {
      prepared = await this.opts.remoteJars.prepare(uri, {
        ...(request.jobId ? { jobId: request.jobId } : {}),
        ...(pin ? { sha256: pin } : {}),
        ...(artifacts.length > 0 ? { artifacts } : {}),
        log,
        ...(caller ? { audit: { principal: caller.principal, reqId: caller.reqId } } : {}),
        charge: (bytes) => transient.ensure(bytes),
        transient: true,
      });
    } catch (err) {
      transient.cancel();
      throw this.refused(err);
    }
    const release = async () => {
      try {
        await prepared.release();
      } finally {
        transient.cancel();
      }
    };
    trace.artifact = prepared.artifact;
    trace.jarId = prepared.jarId;
    try {
      if (this.policy.mode === 'fetched-only') this.policy.checkEntryClass(trace, request.body, await prepared.entryPoints());
      // Without user.artifacts.* (a future Flink that honours the key must not fetch a second time).
      return { jarId: prepared.jarId, ...this.forwarded(request, trace, jobId, prepared.provenance), release };
    } catch (err) {
      await release();
      throw err;
    }
  }

  /**
   * The body and configuration the JobManager gets: the request's, minus what the gateway drops
   * (forwarded-config.ts), plus `extra` (the fetched jar's provenance) and the job id.
   */
  private forwarded(
    request: JarRequest,
    trace: Trace,
    jobId: string | undefined,
    extra: Record<string, string> = {},
  ): Pick<ResolvedJar, 'body' | 'configuration'> {
    const forwarded = forwardedConfiguration(request.flinkConfiguration, this.policy.mode);
    if (forwarded.dropped.length > 0) trace.verdicts.configuration = describeDropped(forwarded.dropped);
    const configuration = { ...forwarded.config, ...extra };
    const body: Record<string, unknown> = { ...request.body, ...(jobId ? { jobId } : {}) };
    if (request.body.flinkConfiguration !== undefined || forwarded.dropped.length > 0 || Object.keys(extra).length > 0)
      body.flinkConfiguration = configuration;
    return { body, configuration };
  }

  /** POST /jars/fetch: fetch a jar by URI and register it with the JobManager, like an upload. */
  async fetchJar(uri: string, sha256: string | undefined, log: Logger, caller?: Caller): Promise<{ filename: string; status: 'success' }> {
    if (!this.opts.jarUriEnabled) throw new GatewayError('GW_JAR_URI_DISABLED');
    if (!this.opts.remoteJars) throw new GatewayError('GW_JAR_URI_UNSUPPORTED', { reason: 'no filesystem plugins are configured' });
    const principal = caller?.principal ?? 'anonymous';
    // Reserved before the fetch, so that fetches racing each other cannot all pass one check.
    const reservation = await this.reserve(principal);
    let prepared: PreparedJar;
    let points: JarEntryPoints;
    try {
      prepared = await this.opts.remoteJars.prepare(uri.trim(), {
        ...(sha256 ? { sha256 } : {}),
        log,
        ...(caller ? { audit: caller } : {}),
        charge: (bytes) => reservation.ensure(bytes),
      });
    } catch (err) {
      reservation.cancel();
      throw this.refused(err);
    }
    try {
      // Charged before the hand-off by the source; a source that did not is charged here, before the jar is kept.
      reservation.ensure(prepared.artifact.size);
      points = await prepared.entryPoints();
    } catch (err) {
      reservation.cancel();
      await prepared.release();
      throw this.refused(err);
    }
    // The jar now belongs to the JobManager like an uploaded one: the caller deletes it.
    prepared.detach();
    reservation.keep(prepared.jarId, prepared.artifact.size);
    this.jars.recordFetched(prepared.jarId, points, principal);
    this.jars.recordDigest(prepared.jarId, prepared.artifact.sha256);
    return { filename: prepared.filename, status: 'success' };
  }

  /**
   * POST /jars/upload: one jar of `principal`'s budget is reserved before `upload` reads any of the
   * body, charged as its bytes arrive (`charge`), and kept under the JobManager's jar id; in
   * fetched-only mode only a placeholder is accepted (`placeholderMaxBytes`, no classes).
   */
  async keepUpload<T extends { body: unknown; size: number; classes: number; sha256?: string }>(
    principal: string,
    upload: (budget: { charge: (bytes: number) => void; placeholderMaxBytes?: number }) => Promise<T>,
  ): Promise<T> {
    const reservation = await this.reserve(principal);
    let result: T;
    try {
      result = await upload({
        charge: (bytes) => reservation.ensure(bytes),
        ...(this.policy.mode === 'fetched-only'
          ? { placeholderMaxBytes: this.opts.placeholderMaxBytes ?? DEFAULT_PLACEHOLDER_MAX_BYTES }
          : {}),
      });
    } catch (err) {
      reservation.cancel();
      throw this.refused(err);
    }
    const jarId = String((result.body as { filename?: unknown }).filename ?? '')
      .split('/')
      .pop();
    if (!jarId) {
      reservation.cancel();
      return result;
    }
    reservation.keep(jarId, result.size);
    this.jars.own(jarId, principal, result.classes > 0);
    if (result.sha256 !== undefined) this.jars.recordDigest(jarId, result.sha256);
    return result;
  }

  /** GET /jars: the JobManager's listing, which also says which kept jars have left it. */
  async listJars(query: string): Promise<unknown> {
    const mark = this.budget.mark();
    const r = await this.opts.cluster.json('GET', `/v1/jars${query}`, { operation: 'list jars' });
    if (r.status !== 200) throw this.opts.cluster.failure('list jars', r);
    this.reconcile(r.body, mark);
    return r.body;
  }

  /** A jar deleted from the JobManager (or not there) is no longer a fetched one, nor anyone's, and its budget comes back. */
  forgetJar(jarId: string): void {
    this.jars.forget(jarId);
    this.budget.giveBack(jarId);
  }

  /** What `principal`'s kept and reserved jars take (count, bytes). */
  jarsHeldBy(principal: string): { count: number; bytes: number } {
    return this.budget.heldBy(principal);
  }

  /**
   * One jar of `principal`'s budget. A refusal may rest on jars that left the JobManager without
   * the gateway seeing it (a JobManager restart empties its upload directory): the JobManager's
   * listing is read once, shared by every refused caller meanwhile, and the reservation tried again.
   */
  private async reserve(principal: string): Promise<JarReservation> {
    try {
      return this.budget.reserve(principal);
    } catch (err) {
      if (!isBudgetRefusal(err)) throw err;
    }
    await this.refreshKeptJars();
    return this.budget.reserve(principal);
  }

  /** A budget refusal that comes with the bytes (after the awaited work) also refreshes, for the next request. */
  private refused(err: unknown): unknown {
    if (isBudgetRefusal(err)) void this.refreshKeptJars();
    return err;
  }

  private refreshKeptJars(): Promise<void> {
    if (!this.refreshing) {
      const mark = this.budget.mark();
      this.refreshing = this.opts.cluster
        .json('GET', '/v1/jars', { operation: 'list jars' })
        .then(
          (r) => {
            if (r.status === 200) this.reconcile(r.body, mark);
          },
          () => undefined,
        )
        .finally(() => {
          this.refreshing = undefined;
        });
    }
    return this.refreshing;
  }

  /** Kept jars missing from a complete listing (Flink lists every *.jar of its jar directory) have left the JobManager. */
  private reconcile(listing: unknown, mark: number): void {
    const files = (listing as { files?: unknown } | undefined)?.files;
    if (!Array.isArray(files)) return;
    const present = new Set(files.map((f) => String((f as { id?: unknown } | null)?.id ?? '')));
    for (const jarId of this.budget.reconcile(present, mark)) this.jars.forget(jarId);
  }

  /** Throws 403 GW_AUTH_JAR_OWNER when `jarId` belongs to another principal. */
  checkJarOwner(jarId: string, principal: string, action: string): void {
    this.jars.checkOwner(jarId, principal, action);
  }

  private traceFor(jarId: string, request: JarRequest | undefined, caller: Caller | undefined, query: string): Trace {
    const byUri = (request?.flinkConfiguration[JOB_JAR_KEY]?.trim() ?? '') !== '';
    const source = byUri ? 'uri' : this.jars.isFetched(jarId) ? 'fetched' : 'upload';
    return {
      source,
      jarId,
      query,
      verdicts: { ...(caller?.permission ? { permission: caller.permission } : {}), policy: this.policy.mode },
    };
  }

  private auditRun(
    route: RunRoute | 'plan',
    trace: Trace,
    caller: Caller | undefined,
    t0: number,
    end: { jobId?: string; outcome: AuditOutcome; status: number; error?: string },
  ): void {
    if (!this.opts.audit || !caller) return;
    const a = trace.artifact;
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
      status: caller.clientGone?.() ? CLIENT_GONE : end.status,
      durationMs: Math.round(performance.now() - t0),
    });
  }
}

/** What one run carries through its steps. */
interface RunContext {
  jarId: string;
  jobId: string;
  /** run-application: the application id the gateway chose with the job id (application-runs.ts). */
  applicationId: string | undefined;
  /** How the job id came about (application-runs.ts); `application`: the JobManager gets none. */
  idRule: ApplicationIds['rule'] | undefined;
  request: JarRequest;
  query: string;
  log: Logger;
  trace: Trace;
  claim: ClaimResult;
  caller: Caller | undefined;
  route: RunRoute;
}

/**
 * The JobManager always gets a jobId, so that retries can be recognised: the body's, else the one
 * Flink 2.x reads from $internal.pipeline.job-id, else a new one.
 */
function jobIdFor(request: JarRequest): string {
  return requestedJobId(request) ?? randomBytes(16).toString('hex');
}

/** The job id the request fixes: the body's, else the one Flink 2.x reads from $internal.pipeline.job-id. */
function requestedJobId(request: JarRequest): string | undefined {
  const configured = request.flinkConfiguration[PIPELINE_JOB_ID_KEY]?.trim().toLowerCase();
  return request.jobId ?? (configured && /^[0-9a-f]{32}$/.test(configured) ? configured : undefined);
}

/** Flink's application-mode key for extra jars; the gateway makes it work for session-cluster runs by URI. */
export const ARTIFACT_LIST_KEY = 'user.artifacts.artifact-list';
const MAX_ARTIFACTS = 32;

/** `uri1;uri2` (Flink's list syntax), trimmed, at most MAX_ARTIFACTS. */
function artifactList(value: string | undefined): string[] {
  const list = (value ?? '')
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
  if (list.length > MAX_ARTIFACTS)
    throw new GatewayError('GW_REQUEST_MALFORMED', {
      type: 'JarRunRequestBody',
      reason: `${ARTIFACT_LIST_KEY} names ${list.length} artifacts; at most ${MAX_ARTIFACTS}`,
    });
  return list;
}

/** gateway.policy.fetched-only.max-upload-size's default, for callers that do not pass it. */
const DEFAULT_PLACEHOLDER_MAX_BYTES = 64 * 1024;

/** The audit status of a call whose client closed the connection before the answer (nginx's 499). */
const CLIENT_GONE = 499;

/** A shared store's failure as the client sees it: 503 with Retry-After, the cause in words. */
function storeUnavailable(operation: string, err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError('GW_HA_STORE_UNAVAILABLE', { store: 'ZooKeeper', operation, reason: (err as Error)?.message ?? String(err) });
}
