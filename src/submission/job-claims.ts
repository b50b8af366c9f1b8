import { createHash } from 'node:crypto';
import { readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { writeFileAtomically } from '../atomic-file';
import { ensurePrivateDir } from '../private-dir';
import type { JarRequest } from './run-request';
import { JOB_JAR_KEY, jobJarPin } from './run-request';

/**
 * Who ran what under a job id. One rule for every path that touches a job id (docs/security.md,
 * "Job ids"), while the JobManager knows the job: a **retry** — the same jobId, the same principal
 * and the same request (jar bytes or URI, entry class, arguments, parallelism, savepoint settings
 * and the configuration as the operator resends it) — gets the first run's result; **anything else
 * under that id** is refused with 409 GW_RUN_JOB_ID_CONFLICT. So no principal can take over another's
 * job id (and with it the job's delegation tokens), and a resubmission under a used id never reports
 * a run that did not happen. Once the JobManager no longer knows the job (it restarted without HA,
 * the cluster was recreated), the claim ends: the run service checks that before it answers from a
 * claim, and a run under the id goes to the JobManager as a new one, where Flink decides.
 */
export interface Claim {
  jobId: string;
  principal: string;
  /** SHA-256 of the request as the fingerprint below defines it. */
  fingerprint: string;
  /** Wall-clock ms. */
  at: number;
}

export type ClaimResult = 'new' | 'retry' | 'conflict';

/** Body fields that make two runs different runs (Flink's JarRunRequestBody). */
const RUN_FIELDS = [
  'entryClass',
  'programArgs',
  'programArgsList',
  'parallelism',
  'savepointPath',
  'allowNonRestoredState',
  'claimMode',
  'restoreMode',
];

/**
 * The fingerprint of a run request. A jar is named by what it holds, never by its upload: for a run
 * by URI the jar id in the path is the operator's placeholder, uploaded anew for every attempt, so
 * the URI (and its pin) stands for the jar; an uploaded jar is named by the SHA-256 of its bytes
 * (`jarSha256`) when the gateway saw them arrive — the operator uploads a fresh copy of a `jarURI`
 * jar for every attempt — and by its id otherwise.
 */
export function runFingerprint(
  jarId: string,
  request: JarRequest,
  principal: string,
  query: string,
  route: 'run' | 'run-application' = 'run',
  jarSha256?: string,
): string {
  const uri = request.flinkConfiguration[JOB_JAR_KEY]?.trim();
  const fields: Record<string, unknown> = {};
  for (const f of RUN_FIELDS) if (request.body[f] !== undefined && request.body[f] !== null) fields[f] = request.body[f];
  const config = sortedEntries(request.flinkConfiguration);
  const canonical = JSON.stringify({
    principal,
    jar: uri ? { uri, sha256: jobJarPin(request.flinkConfiguration) ?? null } : jarSha256 ? { sha256: jarSha256 } : { jarId },
    fields,
    config,
    query: new URLSearchParams(query.replace(/^\?/, '')).toString(),
    // Only when not /run, so that fingerprints stored before run-application existed still match.
    ...(route !== 'run' ? { route } : {}),
  });
  return createHash('sha256').update(canonical).digest('hex');
}

/** A configuration's entries in key order, so that key order never makes two configurations differ. */
export function sortedEntries(config: Readonly<Record<string, string>>): [string, string][] {
  return Object.entries(config).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Where claims live: this process (and its file), or a store shared by the replicas (src/ha/). */
export interface JobClaimBook {
  claim(jobId: string, principal: string, fingerprint: string): ClaimResult | Promise<ClaimResult>;
  release(jobId: string): void | Promise<void>;
  flush(): Promise<void>;
}

export interface JobClaimsOptions {
  /** A private directory of the gateway's (job-claims.json lives there); absent: in memory only. */
  dir?: string;
  /**
   * How long a claim is kept at most; none by default. A claim is honoured only while the
   * JobManager knows its job (run-service.ts), so this and `maxClaims` only bound the memory.
   */
  retentionMs?: number;
  maxClaims?: number;
  wallClock?: () => number;
  log: Logger;
}

const FILE = 'job-claims.json';

/** The claims, in memory and (with `dir`) in one small file rewritten atomically on change. */
export class JobClaims implements JobClaimBook {
  private readonly claims = new Map<string, Claim>();
  private readonly now: () => number;
  private writing: Promise<void> | undefined;
  private dirty = false;

  constructor(private readonly opts: JobClaimsOptions) {
    this.now = opts.wallClock ?? Date.now;
    if (opts.dir) this.load(opts.dir);
  }

  /**
   * Claims `jobId` for this request: 'new' when the id was free, 'retry' when the same principal
   * claimed it with the same request, 'conflict' otherwise (the claim stands unchanged).
   */
  claim(jobId: string, principal: string, fingerprint: string): ClaimResult {
    this.prune();
    const existing = this.claims.get(jobId);
    if (existing) return existing.principal === principal && existing.fingerprint === fingerprint ? 'retry' : 'conflict';
    this.claims.set(jobId, { jobId, principal, fingerprint, at: this.now() });
    this.persist();
    return 'new';
  }

  /** The run never reached the JobManager (a refusal, a fetch that failed): the id is free again. */
  release(jobId: string): void {
    if (this.claims.delete(jobId)) this.persist();
  }

  /** Resolves once every change made so far is on disk. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private prune(): void {
    const cutoff = this.opts.retentionMs === undefined ? -Infinity : this.now() - this.opts.retentionMs;
    let changed = false;
    for (const [id, c] of this.claims) {
      if (c.at >= cutoff && this.claims.size <= (this.opts.maxClaims ?? 100_000)) break;
      this.claims.delete(id);
      changed = true;
    }
    if (changed) this.persist();
  }

  private load(dir: string): void {
    ensurePrivateDir(dir, 'the job-claims directory (gateway.tokens.store-dir)');
    const file = join(dir, FILE);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return;
    }
    try {
      const parsed = JSON.parse(text) as { version: number; claims: Claim[] };
      for (const c of parsed.claims ?? []) {
        if (
          typeof c?.jobId === 'string' &&
          typeof c.principal === 'string' &&
          typeof c.fingerprint === 'string' &&
          typeof c.at === 'number'
        )
          this.claims.set(c.jobId, c);
      }
    } catch (err) {
      const aside = `${file}.corrupt-${Date.now()}`;
      try {
        renameSync(file, aside);
      } catch {
        /* already gone */
      }
      this.opts.log.error({ file, movedTo: aside, err: (err as Error).message }, 'job-claims file is unreadable; moved aside');
    }
  }

  private persist(): void {
    if (!this.opts.dir) return;
    this.dirty = true;
    this.writing ??= this.drain()
      .catch((err: unknown) => this.opts.log.error({ err: (err as Error).message, dir: this.opts.dir }, 'cannot write the job-claims file'))
      .finally(() => {
        this.writing = undefined;
      });
  }

  private async drain(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      const body = { version: 1, claims: [...this.claims.values()] };
      await writeFileAtomically(join(this.opts.dir!, FILE), `${JSON.stringify(body)}\n`);
    }
  }
}
