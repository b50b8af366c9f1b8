import { mkdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { writeFileAtomically } from '../../atomic-file';
import { JOB_ID, type PerJobPayload, parsePerJob } from './per-job-payload';

/** What `<dir>/<jobId>.json` holds. */
export interface JobTokenFile {
  version: 1;
  jobId: string;
  /** ISO 8601: when this content was written. */
  updatedAt: string;
  /** Provider → that provider's entry for the job (the `jobs[<jobId>]` of its payload). */
  tokens: Record<string, unknown>;
  /** Provider → its payload's other top-level fields (e.g. the S3 `region`), when it has any. */
  context?: Record<string, Record<string, unknown>>;
}

export interface FileTokenReceiverOptions {
  dir: string;
  log: Logger;
  /** Wall clock, for `updatedAt`. */
  now?: () => number;
}

/**
 * The `file` delivery: one file per registered job, `<dir>/<jobId>.json` ({@link JobTokenFile}),
 * for setups that mount a shared volume into the TaskManagers.
 *
 * - Written when a provider's payload (per-job convention, `per-job-payload.ts`) brings new or
 *   changed tokens for the job: a temporary file in the same directory (mode 0600, fsync) renamed
 *   over the old one, so a reader never sees half a file.
 * - Only jobs the manager has registered get a file: a payload of a cycle still in flight when its
 *   job was unregistered cannot bring the file back.
 * - Removed when the manager unregisters the job because it ended, its start was rolled back or it
 *   was dropped at gateway start. Not at gateway shutdown (the manager's session end): the job may
 *   still run and its tokens stay valid until they expire; the next gateway start registers it
 *   again (and rewrites the file) or drops it (and removes the file).
 * - File operations run one at a time, in order; a failure is logged (never a token) and the next
 *   update tries again.
 */
export class FileTokenReceiver {
  private readonly payloads = new Map<string, PerJobPayload>();
  private readonly known = new Set<string>();
  /** jobId → the content last written (without `updatedAt`). */
  private readonly written = new Map<string, string>();
  private chain: Promise<void> = Promise.resolve();
  private readonly now: () => number;

  constructor(private readonly opts: FileTokenReceiverOptions) {
    this.now = opts.now ?? Date.now;
  }

  get dir(): string {
    return this.opts.dir;
  }

  /** Creates the directory (mode 0700 when new). */
  async init(): Promise<void> {
    await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
  }

  /** A provider's new payload; resolves once the affected files are written. */
  update(provider: string, bytes: Uint8Array): Promise<void> {
    const parsed = parsePerJob(bytes);
    if (parsed) this.payloads.set(provider, parsed);
    else this.payloads.delete(provider);
    return this.enqueue(() => this.sync());
  }

  jobRegistering(jobId: string): Promise<void> {
    this.known.add(jobId.toLowerCase());
    // Tokens for it may already be in a payload (a restart registers jobs again).
    return this.enqueue(() => this.sync());
  }

  jobUnregistered(jobId: string, cause: 'unregistered' | 'session-end'): Promise<void> {
    const id = jobId.toLowerCase();
    this.known.delete(id);
    this.written.delete(id);
    if (cause === 'session-end') return this.enqueue(async () => undefined);
    return this.enqueue(() => this.remove(id));
  }

  /** Resolves when every queued file operation is done. */
  flush(): Promise<void> {
    return this.enqueue(async () => undefined);
  }

  private enqueue(op: () => Promise<void>): Promise<void> {
    const run = this.chain.then(op).catch((err: unknown) => {
      this.opts.log.error({ dir: this.opts.dir, err: describe(err) }, 'file receiver: cannot update the job token files');
    });
    this.chain = run;
    return run;
  }

  private async sync(): Promise<void> {
    for (const jobId of this.known) {
      if (!JOB_ID.test(jobId)) continue;
      const tokens: Record<string, unknown> = {};
      const context: Record<string, Record<string, unknown>> = {};
      for (const [provider, payload] of this.payloads) {
        const entry = Object.entries(payload.jobs).find(([id]) => id.toLowerCase() === jobId)?.[1];
        if (entry === undefined) continue;
        tokens[provider] = entry;
        if (Object.keys(payload.context).length > 0) context[provider] = payload.context;
      }
      if (Object.keys(tokens).length === 0) {
        // It vanished from every payload (or never had tokens): no file rather than an empty one.
        if (this.written.has(jobId)) {
          this.written.delete(jobId);
          await this.remove(jobId);
        }
        continue;
      }
      const body = { tokens, ...(Object.keys(context).length > 0 ? { context } : {}) };
      const key = JSON.stringify(body);
      if (this.written.get(jobId) === key) continue;
      const file: JobTokenFile = { version: 1, jobId, updatedAt: new Date(this.now()).toISOString(), ...body };
      await writeFileAtomically(join(this.opts.dir, `${jobId}.json`), `${JSON.stringify(file, null, 2)}\n`);
      this.written.set(jobId, key);
      this.opts.log.debug({ jobId, providers: Object.keys(tokens) }, 'file receiver: job token file written');
    }
  }

  private async remove(jobId: string): Promise<void> {
    if (!JOB_ID.test(jobId)) return;
    try {
      await unlink(join(this.opts.dir, `${jobId}.json`));
      this.opts.log.info({ jobId }, 'file receiver: job token file removed');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

/** An fs error's code and path; never file contents. */
function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.code}${e.path ? ` (${e.path})` : ''}` : String((err as Error)?.message ?? err);
}
