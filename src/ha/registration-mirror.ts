import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, systemClock, type TimerHandle } from '../clock';
import type { StoredRegistration } from '../submission/registration-store';
import type { SharedRegistrationStore } from './shared-store';

export interface MirrorOptions {
  /** Timers for reading again after a failed read (injected in tests). */
  clock?: Clock;
  /** How long after a failed read to read again; default 1 s. */
  retryMs?: number;
}

const RETRY_MS = 1_000;

/**
 * What a shared registration store does the same on every engine (ZooKeeper nodes, Kubernetes
 * ConfigMaps): the replica's mirror of every registration, which `list` and `get` answer from, and
 * the `added`, `updated` and `removed` events when a read finds a change; reads that coalesce (a
 * `sync` asked for while one runs makes it run once more, never twice at once); and a failed read
 * retried after `retryMs` until one succeeds, so no change is missed for good.
 *
 * An engine reads its records in `readAll` and hands each to `found` (or `gone`), says which exist
 * with `keepOnly`, and records its own writes with `stored` and `dropped` (no event: the writer
 * knows). A record is handed over only after it opened and parsed as a registration of that job.
 */
export abstract class RegistrationMirror
  extends EventEmitter<{ added: [StoredRegistration]; updated: [StoredRegistration]; removed: [string] }>
  implements SharedRegistrationStore
{
  readonly shared = true;
  private readonly jobs = new Map<string, StoredRegistration>();
  private readonly clock: Clock;
  protected readonly retryMs: number;
  private syncing: Promise<void> | undefined;
  private again = false;
  private fullAgain = false;
  private retry: TimerHandle | undefined;
  private stopped = false;

  constructor(
    protected readonly log: Logger,
    opts: MirrorOptions,
  ) {
    super();
    this.clock = opts.clock ?? systemClock;
    this.retryMs = opts.retryMs ?? RETRY_MS;
  }

  /** Where the records live, for logs and start-up messages. */
  abstract get where(): string;
  abstract init(): Promise<void>;
  abstract put(reg: StoredRegistration): Promise<void>;
  abstract remove(jobId: string, attempt?: string): Promise<void>;
  /** Reads the engine's records (every one again when `full`: an engine whose watches were lost). */
  protected abstract readAll(full: boolean): Promise<void>;

  list(): StoredRegistration[] {
    return [...this.jobs.values()];
  }

  get(jobId: string): StoredRegistration | undefined {
    return this.jobs.get(jobId);
  }

  async flush(): Promise<void> {
    await this.syncing;
  }

  /**
   * Reads the store again; runs once more if asked again meanwhile (a full read stays full until one
   * succeeds). A failed read rejects and is retried after `retryMs`.
   */
  sync(full = false): Promise<void> {
    this.fullAgain ||= full;
    if (this.syncing) {
      this.again = true;
      return this.syncing;
    }
    this.syncing = (async () => {
      do {
        this.again = false;
        const all = this.fullAgain;
        this.fullAgain = false;
        try {
          await this.readAll(all);
        } catch (err) {
          this.fullAgain ||= all;
          this.retryLater();
          throw err;
        }
      } while (this.again);
    })().finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  /** No more reads or retries (an engine also ends what it follows). */
  stop(): void {
    this.stopped = true;
    this.retry?.cancel();
    this.retry = undefined;
  }

  protected get isStopped(): boolean {
    return this.stopped;
  }

  /** Reads again after `retryMs` (one pending retry at a time). */
  protected retryLater(): void {
    if (this.retry || this.stopped) return;
    this.retry = this.clock.setTimer(() => {
      this.retry = undefined;
      void this.sync().catch((err: unknown) =>
        this.log.warn(
          { err: (err as Error).message, retryInMs: this.retryMs },
          'cannot read the shared job registrations; reading them again shortly',
        ),
      );
    }, this.retryMs);
  }

  /** A registration read from the store: `added` or `updated` when it is new or changed. */
  protected found(rec: StoredRegistration): void {
    const before = this.jobs.get(rec.jobId);
    if (before && JSON.stringify(before) === JSON.stringify(rec)) return;
    this.jobs.set(rec.jobId, rec);
    this.emit(before ? 'updated' : 'added', rec);
  }

  /** A registration the store no longer holds: `removed` if the mirror had it. */
  protected gone(jobId: string): void {
    if (this.jobs.delete(jobId)) this.emit('removed', jobId);
  }

  /** After a list of the store: every registration not in it is `gone`. */
  protected keepOnly(present: ReadonlySet<string>): void {
    for (const jobId of [...this.jobs.keys()]) if (!present.has(jobId)) this.gone(jobId);
  }

  /** This replica's own write, stored. */
  protected stored(rec: StoredRegistration): void {
    this.jobs.set(rec.jobId, rec);
  }

  /** This replica's own removal, done. */
  protected dropped(jobId: string): void {
    this.jobs.delete(jobId);
  }
}
