import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { JobRegistrar } from './job-registrations';

/** Flink 2.3's ApplicationState values after which nothing of the application runs any more. */
const TERMINAL = new Set(['FINISHED', 'FAILED', 'CANCELED']);
/** Reads of an application Flink no longer knows (404) before it counts as gone. */
const GONE_AFTER_READS = 3;

/** The ids a run-application submission gets: the job the gateway registers first, and its application. */
export interface ApplicationIds {
  jobId: string;
  applicationId: string;
  /**
   * How the job id came about. `application`: Flink fixes no job id (no HA, none in the request),
   * and none is sent, so that every job of the application gets its own id from Flink; `jobId` is
   * then the application id, the key the application is registered under until its jobs are.
   */
  rule: 'request' | 'ha-application-id' | 'application';
}

/** An application submitted through the gateway, followed until it ends. */
interface TrackedApplication {
  applicationId: string;
  /** The configuration and principal the application's first job was registered with. */
  configuration: Readonly<Record<string, string>>;
  principal: string;
  /** Gives the transient jar back once the application is terminal (main() may load classes from it until then). */
  release: () => Promise<void>;
  missing: number;
  /** Jobs of the application already seen: each is registered once, never again after the watcher ended it. */
  seen: Set<string>;
  log: Logger;
  /** Registered under the application id until its first job is registered under its own (rule `application`). */
  provisional: boolean;
}

export interface ApplicationRunsOptions {
  cluster: JobManagerClient;
  /** Absent when delegation tokens are off: applications are followed for their jar only. */
  registrations?: JobRegistrar;
  /** How often a followed application is read (`gateway.tokens.watcher.interval`). */
  intervalMs: number;
  log: Logger;
}

/**
 * Flink 2.3 applications (`POST /jars/:jarid/run-application`), as Flink runs them:
 *
 * - **Job ids.** Flink's `JarRunApplicationHandler` fixes the first job's id to the application's id
 *   when the cluster runs with high availability (and the request fixes none), so that a recovered
 *   application finds its job again; without HA it fixes nothing. The gateway registers the job before
 *   submitting, so it must know that id first: with HA it chooses the application id (the request's,
 *   else a new one) and uses it as the job id, as Flink would; without HA it chooses a job id itself.
 * - **Later jobs.** A multi-job application's `main()` submits further jobs inside the JobManager;
 *   each is registered with the application's own registration (its configuration and principal),
 *   found on `GET /applications/:id`, never as a discovered job with the cluster default scope.
 * - **The jar.** `main()` may load classes from the jar until the application ends, so a transient
 *   jar (a run by URI) is given back only once `GET /applications/:id` says it is terminal.
 */
export class ApplicationRuns {
  private readonly apps = new Map<string, TrackedApplication>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private haActive: Promise<boolean> | undefined;

  constructor(private readonly opts: ApplicationRunsOptions) {}

  /** The ids for a run-application request: see the class comment. */
  async idsFor(requested: { jobId?: string | undefined; applicationId?: string | undefined }): Promise<ApplicationIds> {
    const applicationId = requested.applicationId ?? randomBytes(16).toString('hex');
    if (requested.jobId) return { jobId: requested.jobId, applicationId, rule: 'request' };
    if (await this.clusterHa()) return { jobId: applicationId, applicationId, rule: 'ha-application-id' };
    return { jobId: applicationId, applicationId, rule: 'application' };
  }

  /**
   * Whether the JobManager runs with high availability, as Flink's `HighAvailabilityMode.fromConfig`
   * decides: `high-availability.type` (or its older names) other than NONE. Read once from the
   * JobManager's own configuration; a read that fails is tried again at the next submission.
   */
  private clusterHa(): Promise<boolean> {
    this.haActive ??= this.readHa().catch((err: unknown) => {
      this.haActive = undefined;
      throw err;
    });
    return this.haActive;
  }

  private async readHa(): Promise<boolean> {
    const res = await this.opts.cluster.json('GET', '/v1/jobmanager/config', { operation: 'jobmanager configuration' });
    if (res.status !== 200 || !Array.isArray(res.body)) throw this.opts.cluster.failure('jobmanager configuration', res);
    const conf = new Map((res.body as { key?: unknown; value?: unknown }[]).map((e) => [String(e.key), String(e.value)]));
    const mode = conf.get('high-availability.type') ?? conf.get('high-availability') ?? conf.get('recovery.mode') ?? 'NONE';
    return mode.trim().toUpperCase() !== 'NONE' && mode.trim() !== '';
  }

  /** Follows an accepted application until it is terminal: its later jobs are registered, its jar released at the end. */
  track(app: {
    applicationId: string;
    configuration: Readonly<Record<string, string>>;
    principal: string;
    release: () => Promise<void>;
    log: Logger;
    provisional?: boolean;
  }): void {
    this.apps.set(app.applicationId, { ...app, missing: 0, seen: new Set(), provisional: app.provisional === true });
    this.schedule();
  }

  /** The applications being followed (for tests and the status). */
  tracked(): string[] {
    return [...this.apps.keys()];
  }

  /**
   * A job the watcher found that nobody registered: reads the followed applications at once, and
   * answers true when the job is one of theirs (it is then registered with its application's registration).
   */
  async adopt(jobId: string): Promise<boolean> {
    if (this.apps.size === 0) return false;
    await this.readAll();
    return this.opts.registrations?.isKnown(jobId) === true;
  }

  /**
   * Stops following (gateway shutdown). A transient jar of an application still running stays on
   * the JobManager: its main() may still load classes from it (deleting it would fail the
   * application), and Flink removes its upload directory's jars when the JobManager stops.
   */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.reading;
    for (const app of this.apps.values())
      app.log.info({ applicationId: app.applicationId }, 'gateway stopping: the running application keeps its transient jar');
    this.apps.clear();
  }

  private schedule(): void {
    if (this.timer || this.apps.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.readAll().finally(() => this.schedule());
    }, this.opts.intervalMs);
    this.timer.unref();
  }

  /** One read of every followed application; concurrent callers share it. */
  private readAll(): Promise<void> {
    this.reading ??= (async () => {
      try {
        for (const app of [...this.apps.values()]) await this.readOne(app);
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }

  private async readOne(app: TrackedApplication): Promise<void> {
    let res: Awaited<ReturnType<JobManagerClient['json']>>;
    try {
      res = await this.opts.cluster.json('GET', `/v1/applications/${app.applicationId}`, { operation: 'application status' });
    } catch (err) {
      app.log.debug({ err: (err as Error).message }, 'cannot read the application; trying again at the next read');
      return;
    }
    if (res.status === 404) {
      if (++app.missing >= GONE_AFTER_READS) await this.end(app, 'the JobManager no longer knows the application');
      return;
    }
    if (res.status !== 200) return;
    app.missing = 0;
    const body = res.body as { status?: unknown; jobs?: { jid?: unknown; state?: unknown }[] };
    for (const job of Array.isArray(body.jobs) ? body.jobs : []) {
      if (typeof job?.jid !== 'string' || !/^[0-9a-f]{32}$/.test(job.jid) || job.jid === app.applicationId || app.seen.has(job.jid))
        continue;
      app.seen.add(job.jid);
      // A job that ended before it was seen needs no tokens any more.
      if (!TERMINAL.has(String(job.state))) await this.registerLater(app, job.jid);
    }
    if (app.provisional && ((Array.isArray(body.jobs) && body.jobs.length > 0) || TERMINAL.has(String(body.status))))
      await this.endProvisional(app);
    if (TERMINAL.has(String(body.status))) await this.end(app, `the application is ${String(body.status)}`);
  }

  /** A job of the application nobody registered yet gets the application's own registration. */
  private async registerLater(app: TrackedApplication, jobId: string): Promise<void> {
    const registrar = this.opts.registrations;
    if (!registrar || registrar.isKnown(jobId)) return;
    const log = app.log.child({ jobId });
    try {
      await registrar.register(jobId, app.configuration, log, app.principal);
      registrar.submitted(jobId);
      log.info(
        { applicationId: app.applicationId },
        "a later job of the application is registered with the application's own registration",
      );
    } catch (err) {
      // Its first job passed the same providers with the same configuration: a refusal now is a
      // provider's change of mind; the job watcher then treats the job as one nobody registered.
      log.warn(
        { err: (err as Error).message, applicationId: app.applicationId },
        "a later job of the application could not be registered with the application's registration",
      );
    }
  }

  /** The registration under the application id was a stand-in until the application's jobs had ids of their own. */
  private async endProvisional(app: TrackedApplication): Promise<void> {
    app.provisional = false;
    await this.opts.registrations?.unregister(app.applicationId, "the application's jobs are registered under their own ids");
  }

  private async end(app: TrackedApplication, reason: string): Promise<void> {
    if (app.provisional) await this.endProvisional(app);
    this.apps.delete(app.applicationId);
    app.log.info({ applicationId: app.applicationId, reason }, 'application no longer followed; its transient jar (if any) is given back');
    await this.releaseQuietly(app);
  }

  private async releaseQuietly(app: TrackedApplication): Promise<void> {
    try {
      await app.release();
    } catch (err) {
      app.log.warn({ err: (err as Error).message }, "cannot give back the application's transient jar");
    }
  }
}
