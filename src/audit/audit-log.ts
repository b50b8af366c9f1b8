import { mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import pino from 'pino';

/** Who asked, for every audit record. */
export interface AuditSubject {
  /** `token:<name>`, `cert:<CN>` or `anonymous`. */
  principal: string;
  reqId: string;
}

/** How a request ended, in a word: the audit log's `outcome`. */
export type AuditOutcome = 'accepted' | 'deduplicated' | 'cached' | 'fetched' | 'rejected' | 'denied' | 'failed';

/** The checks a submission or fetch passed (or the one it failed), by name. */
export type Verdicts = Record<string, string>;

export interface FetchAudit extends AuditSubject {
  /** Redacted: no userinfo, query string or fragment. */
  uri: string;
  version?: string;
  etag?: string;
  sha256?: string;
  size?: number;
  fromCache?: boolean;
  jobId?: string;
  verdicts: Verdicts;
  outcome: AuditOutcome;
  /** The gateway error code when it failed. */
  error?: string;
  durationMs: number;
}

/** How a submission or a job-control call ended. */
interface AuditEnd {
  verdicts: Verdicts;
  outcome: AuditOutcome;
  /** The gateway error code when it was refused or failed. */
  error?: string;
  status: number;
  durationMs: number;
}

export interface SubmissionAudit extends AuditSubject, AuditEnd {
  /** `run`, `run-application` (Flink 2.3), `plan`, `job-graph` (POST /v1/jobs), or the method and path of a denied request. */
  route: string;
  /** Where the jar came from: `uri`, `fetched` (a jar id from POST /jars/fetch), `upload`. */
  source?: string;
  uri?: string;
  version?: string;
  sha256?: string;
  size?: number;
  jarId?: string;
  jobId?: string;
}

/** A call that changes a running job or the cluster (cancel, stop, savepoint, rescale, shutdown). */
export interface ControlAudit extends AuditSubject, AuditEnd {
  method: string;
  /** The path only: no query string. */
  path: string;
  jobId?: string;
}

/**
 * What the gateway did about a job it had not registered before it started (docs/adr/0010): a job
 * from POST /v1/jobs, or one the job watcher discovered on the JobManager.
 */
export interface JobAudit {
  jobId: string;
  /** `job-graph` (POST /v1/jobs through the gateway) or `discovered` (found by the job watcher). */
  source: 'job-graph' | 'discovered';
  /** `registered` (cluster default scope), `cancelled`, `ignored`, or `failed` (a cancel that did not go through). */
  action: 'registered' | 'cancelled' | 'ignored' | 'failed';
  /** The principal it was registered under (the reserved `gateway:cluster-default`). */
  principal: string;
  /** Who sent the job graph, for `job-graph`. */
  submittedBy?: string;
  reqId?: string;
  /** The JobManager's state of the job when it was found. */
  state?: string;
  /** `gateway.tokens.unregistered-jobs`. */
  policy: string;
  /** Why it was cancelled or what failed: a gateway error code, or a provider's refusal. */
  error?: string;
  reason?: string;
}

/**
 * One JSON line per submission, per fetch and per job-control call, separate from the operational log: its own
 * destination (`gateway.audit.log`), never filtered by the log level, written synchronously (a
 * handful of lines per job, and each line should be written before the answer is sent). Records
 * hold redacted URIs and principal names only — no credential ever reaches them. The records
 * are flat and few: `JSON.stringify` onto pino's sonic-boom destination, no logger around it.
 */
export class AuditLog {
  private constructor(private readonly out: ReturnType<typeof pino.destination> | undefined) {
    // A write error (disk full) is reported as an event; unhandled, it would end the process.
    out?.on('error', () => undefined);
  }

  /** `stdout`, `none`, or a file path (created 0600 with its directory, appended to). */
  static open(target: string): AuditLog {
    if (target === 'none') return new AuditLog(undefined);
    if (target === 'stdout') return new AuditLog(pino.destination({ dest: 1, sync: true }));
    mkdirSync(dirname(target), { recursive: true });
    // Audit lines name principals and URIs: the file is the owner's only.
    return new AuditLog(pino.destination({ fd: openSync(target, 'a', 0o600), sync: true }));
  }

  fetch(record: FetchAudit): void {
    this.write({ time: new Date().toISOString(), audit: 'fetch', ...record });
  }

  submission(record: SubmissionAudit): void {
    this.write({ time: new Date().toISOString(), audit: 'submission', ...record });
  }

  control(record: ControlAudit): void {
    this.write({ time: new Date().toISOString(), audit: 'control', ...record });
  }

  job(record: JobAudit): void {
    this.write({ time: new Date().toISOString(), audit: 'job', ...record });
  }

  /**
   * One whole line per write, synchronously (sonic-boom, as pino's own stdout: it retries a pipe
   * that is full — EAGAIN — instead of dropping the line, and finishes a partial write before
   * returning, so audit and log lines never interleave mid-line on stdout).
   */
  private write(record: Record<string, unknown>): void {
    try {
      this.out?.write(`${JSON.stringify(record)}\n`);
    } catch {
      /* a full disk must not fail the request; the operational log still has it */
    }
  }

  close(): void {
    if (this.out && (this.out as unknown as { fd: number }).fd !== 1) this.out.destroy();
  }
}

/** The outcome word for an error: a client's mistake or policy (4xx) is `rejected`, the rest `failed`. */
export function outcomeOf(err: unknown): { outcome: AuditOutcome; error: string; status: number } {
  const e = err as { code?: string; status?: number };
  const status = typeof e?.status === 'number' ? e.status : 500;
  return {
    outcome: status === 401 || status === 403 ? 'denied' : status < 500 ? 'rejected' : 'failed',
    error: e?.code ?? 'GW_INTERNAL_ERROR',
    status,
  };
}
