import type { Logger } from 'pino';
import type { JobManagerClient } from './jobmanager-client';

/**
 * The Flink version of the fronted JobManager, where the gateway must answer as that version would
 * (today: whether `POST /jars/:jarid/run-application` exists, Flink 2.3+).
 *
 * Learnt from the JobManager's own `GET /v1/config` (`flink-version`, what the Web UI and the
 * operator read), on first need and kept once known: a JobManager's version changes only with a
 * restart of its process, and the gateway runs as its sidecar. Until it is known (the JobManager is
 * unreachable) nothing is assumed; `gateway.cluster.flink-version` declares it instead (a proxy in
 * between that hides /config, or a test against a fake). Everything else passes to the JobManager,
 * which answers for its own version (run body fields, deprecated query parameters, /applications).
 */
export class ClusterVersion {
  private known: string | undefined;
  private pending: Promise<string | undefined> | undefined;

  constructor(
    private readonly cluster: JobManagerClient,
    private readonly log: Logger,
    declared?: string,
  ) {
    this.known = declared;
  }

  /** The version (e.g. `2.3.0`), or undefined while the JobManager cannot say. */
  async get(): Promise<string | undefined> {
    if (this.known) return this.known;
    this.pending ??= this.learn().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  private async learn(): Promise<string | undefined> {
    try {
      const res = await this.cluster.json('GET', '/v1/config', { operation: 'cluster version' });
      const version = (res.body as { 'flink-version'?: unknown } | undefined)?.['flink-version'];
      if (res.status === 200 && typeof version === 'string' && version !== '') {
        this.known = version;
        this.log.info({ flinkVersion: version }, "learnt the JobManager's Flink version from GET /v1/config");
      }
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, "cannot learn the JobManager's Flink version yet");
    }
    return this.known;
  }
}

/** Whether `version` (`major.minor[.patch][-suffix]`) is at least `major.minor`. */
export function atLeast(version: string, major: number, minor: number): boolean {
  const m = /^(\d+)\.(\d+)/.exec(version);
  if (!m) return false;
  const [a, b] = [Number(m[1]), Number(m[2])];
  return a > major || (a === major && b >= minor);
}

/** Flink 2.3 added application submission (FLIP-549): `/jars/:jarid/run-application`, `/applications`. */
export function hasApplications(version: string): boolean {
  return atLeast(version, 2, 3);
}
