import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

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

export interface SubmissionAudit extends AuditSubject {
  /** `run`, `plan`, `job-graph` (POST /v1/jobs), or the method and path of a denied request. */
  route: string;
  /** Where the jar came from: `uri`, `fetched` (a jar id from POST /jars/fetch), `upload`. */
  source?: string;
  uri?: string;
  version?: string;
  sha256?: string;
  size?: number;
  jarId?: string;
  jobId?: string;
  verdicts: Verdicts;
  outcome: AuditOutcome;
  error?: string;
  status: number;
  durationMs: number;
}

/**
 * One JSON line per submission and per fetch, separate from the operational log: its own
 * destination (`gateway.audit.log`), never filtered by the log level, written synchronously (a
 * handful of lines per job, and each line should be written before the answer is sent). Records
 * hold redacted URIs and principal names only — no credential ever reaches them. Plain
 * `JSON.stringify` + `writeSync`: the records are flat and few, so a logger adds nothing here.
 */
export class AuditLog {
  private constructor(private readonly fd: number | undefined, private readonly owned = false) {}

  /** `stdout`, `none`, or a file path (created 0600 with its directory, appended to). */
  static open(target: string): AuditLog {
    if (target === 'none') return new AuditLog(undefined);
    if (target === 'stdout') return new AuditLog(1);
    mkdirSync(dirname(target), { recursive: true });
    // Audit lines name principals and URIs: the file is the owner's only.
    return new AuditLog(openSync(target, 'a', 0o600), true);
  }

  static disabled(): AuditLog {
    return new AuditLog(undefined);
  }

  fetch(record: FetchAudit): void {
    this.write({ time: new Date().toISOString(), audit: 'fetch', ...record });
  }

  submission(record: SubmissionAudit): void {
    this.write({ time: new Date().toISOString(), audit: 'submission', ...record });
  }

  /** One whole line per write(2), so lines from the log and the audit never interleave mid-line. */
  private write(record: Record<string, unknown>): void {
    if (this.fd === undefined) return;
    try {
      writeSync(this.fd, `${JSON.stringify(record)}\n`);
    } catch {
      /* a full disk must not fail the request; the operational log still has it */
    }
  }

  close(): void {
    if (this.owned && this.fd !== undefined) closeSync(this.fd);
  }
}

/** The outcome word for an error: a client's mistake or policy (4xx) is `rejected`, the rest `failed`. */
export function outcomeOf(err: unknown): { outcome: AuditOutcome; error: string; status: number } {
  const e = err as { code?: string; status?: number };
  const status = typeof e?.status === 'number' ? e.status : 500;
  return { outcome: status === 401 || status === 403 ? 'denied' : status < 500 ? 'rejected' : 'failed', error: e?.code ?? 'GW_INTERNAL_ERROR', status };
}
