import { readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { writeFileAtomically } from '../atomic-file';
import { ensurePrivateDir } from '../private-dir';

/** One persisted job registration. Never holds a sensitive value (the configuration is redacted). */
export interface StoredRegistration {
  jobId: string;
  /** Who submitted the job (its allow-lists are that principal's after a restart too). */
  principal?: string;
  /** The redacted job configuration the providers were given. */
  configuration: Record<string, string>;
  /** `gateway.artifact.*` keys (the jar's URI, digest and version) when the jar came from a URI. */
  provenance: Record<string, string>;
  /** ISO-8601. */
  registeredAt: string;
  /** How it came to be registered (docs/adr/0010); absent in older stores: `submitted`. */
  source?: RegistrationSource;
  /** For a `job-graph` registration: who sent the job graph (it is registered under the cluster default principal). */
  submittedBy?: string;
  /**
   * False from the registration until the JobManager answered the run (accepted, or the outcome is
   * unknown); absent means true (older stores). A shared store's leader does not drop a job the
   * JobManager does not list while another replica is still submitting it.
   */
  submitted?: boolean;
  /** Which run attempt wrote it: a rolled-back attempt removes only its own record, never a later retry's (HA: from another replica). */
  attempt?: string;
  /**
   * ISO-8601: since when the job has been gone from the JobManager (or SUSPENDED past Flink's
   * job-leader timeout). Its providers were told to unregister it, but the record stays, so that the
   * same job id coming back (a slow HA recovery) is registered again with it, never as discovered.
   */
  absentSince?: string;
}

/**
 * Where job registrations outlive the gateway process: a file of its own (one replica), or a
 * store shared by the replicas of an HA cluster (src/ha/). `list` and `get` answer from memory.
 */
export interface RegistrationStore {
  /** Where it lives, for log lines (a directory, or a ZooKeeper path). */
  readonly where: string;
  /** Written by other replicas too (HA): a stored run may be in flight on another gateway. */
  readonly shared: boolean;
  init(): Promise<void>;
  list(): StoredRegistration[];
  get(jobId: string): StoredRegistration | undefined;
  put(reg: StoredRegistration): Promise<void>;
  /** Removes the job's record; with `attempt`, only if that attempt wrote the record now stored. */
  remove(jobId: string, attempt?: string): Promise<void>;
  /** Resolves once every change made so far is stored. */
  flush(): Promise<void>;
}

/** `submitted`: a run through the gateway; `job-graph`: POST /v1/jobs; `discovered`: found by the job watcher. */
export type RegistrationSource = 'submitted' | 'job-graph' | 'discovered';

/** A stored registration read back (from a file, or a store other replicas write): only well-formed fields are kept. */
export function parseStoredRegistration(value: unknown): StoredRegistration | undefined {
  const j = value as Partial<StoredRegistration> | null;
  if (typeof j?.jobId !== 'string' || !/^[0-9a-f]{32}$/.test(j.jobId) || typeof j.configuration !== 'object' || j.configuration === null)
    return undefined;
  const strings = (o: unknown): Record<string, string> =>
    Object.fromEntries(Object.entries((o ?? {}) as Record<string, unknown>).filter(([, v]) => typeof v === 'string')) as Record<
      string,
      string
    >;
  return {
    jobId: j.jobId,
    ...(typeof j.principal === 'string' ? { principal: j.principal } : {}),
    configuration: strings(j.configuration),
    provenance: strings(j.provenance),
    registeredAt: String(j.registeredAt),
    ...(j.source === 'job-graph' || j.source === 'discovered' ? { source: j.source } : {}),
    ...(typeof j.submittedBy === 'string' ? { submittedBy: j.submittedBy } : {}),
    ...(j.submitted === false ? { submitted: false } : {}),
    ...(typeof j.attempt === 'string' ? { attempt: j.attempt } : {}),
    ...(typeof j.absentSince === 'string' && Number.isFinite(Date.parse(j.absentSince)) ? { absentSince: j.absentSince } : {}),
  };
}

interface StoreFile {
  version: 1;
  jobs: StoredRegistration[];
}

const FILE = 'registrations.json';

/**
 * The job-registration store: one small JSON file, rewritten whole on each change through a
 * temporary file and a rename (atomic on POSIX), so a crash leaves the old or the new version,
 * never half of one. The JobManager exposes no per-job configuration, so this is what lets a
 * restarted gateway register its running jobs again. Writes are serialised and coalesced.
 */
export class FileRegistrationStore implements RegistrationStore {
  readonly shared = false;
  private readonly jobs = new Map<string, StoredRegistration>();
  private writing: Promise<void> | undefined;
  private dirty = false;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
  ) {}

  get where(): string {
    return this.dir;
  }

  get file(): string {
    return join(this.dir, FILE);
  }

  /** Loads the store; an unreadable file is moved aside (logged) and the store starts empty. */
  async init(): Promise<void> {
    ensurePrivateDir(this.dir, 'the job-registration store (gateway.tokens.store-dir)');
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    try {
      const parsed = JSON.parse(text) as StoreFile;
      if (parsed.version !== 1 || !Array.isArray(parsed.jobs))
        throw new Error(`unsupported store format (version ${String(parsed.version)})`);
      for (const j of parsed.jobs) {
        const rec = parseStoredRegistration(j);
        if (rec) this.jobs.set(rec.jobId, rec);
      }
    } catch (err) {
      const aside = `${this.file}.corrupt-${Date.now()}`;
      await rename(this.file, aside).catch(() => undefined);
      this.log.error(
        { file: this.file, movedTo: aside, err: (err as Error).message },
        'job-registration store is unreadable; moved aside, running jobs will not be registered again',
      );
    }
  }

  list(): StoredRegistration[] {
    return [...this.jobs.values()];
  }

  get(jobId: string): StoredRegistration | undefined {
    return this.jobs.get(jobId);
  }

  async put(reg: StoredRegistration): Promise<void> {
    this.jobs.set(reg.jobId, reg);
    await this.persist();
  }

  async remove(jobId: string, attempt?: string): Promise<void> {
    if (attempt !== undefined && this.jobs.get(jobId)?.attempt !== attempt) return;
    if (!this.jobs.delete(jobId)) return;
    await this.persist();
  }

  /** Resolves once every change made so far is on disk. */
  async flush(): Promise<void> {
    await this.writing;
  }

  private persist(): Promise<void> {
    this.dirty = true;
    this.writing ??= this.drain().finally(() => {
      this.writing = undefined;
    });
    return this.writing;
  }

  /** Writes until no change is pending; every caller waiting on this promise sees its change written. */
  private async drain(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      const body: StoreFile = { version: 1, jobs: this.list() };
      try {
        await writeFileAtomically(this.file, `${JSON.stringify(body, null, 2)}\n`);
      } catch (err) {
        this.dirty = true;
        throw err;
      }
    }
  }
}
