import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ensurePrivateDir } from '../private-dir';
import { FileDigest } from '../download/file-digest';

/** What the cache remembers about one URI (never the URI's query: it may hold a signature). */
export interface CacheEntry {
  uri: string;
  sha256: string;
  size: number;
  etag?: string;
  version?: string;
  lastModified?: number;
  fetchedAt: number;
  lastUsed: number;
}

/**
 * Content-addressed jar cache: `blobs/<sha256>.jar`, an index by URI key in `index/<key>.json`,
 * downloads in `tmp/` (renamed into blobs only when complete and verified). The index is rebuilt
 * from disk at start; eviction is least-recently-used and never removes a blob in use.
 */
export class JarCache {
  private readonly entries = new Map<string, CacheEntry>();
  private readonly inUse = new Map<string, number>();
  /** Per blob, the file identity (see `identity`) it had when its bytes last matched its digest. */
  private readonly verified = new Map<string, string>();
  private readonly verifying = new Map<string, Promise<boolean>>();
  private readonly refreshing = new Set<Promise<unknown>>();
  private hashed = 0;

  constructor(
    readonly dir: string,
    private readonly maxBytes: number,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  get tmpDir(): string {
    return join(this.dir, 'tmp');
  }

  blobPath(sha256: string): string {
    return join(this.dir, 'blobs', `${sha256}.jar`);
  }

  async init(): Promise<void> {
    ensurePrivateDir(this.dir, 'the jar cache (gateway.artifacts.cache-dir)');
    await rm(this.tmpDir, { recursive: true, force: true }); // leftovers of interrupted downloads
    for (const d of ['blobs', 'index', 'tmp']) {
      await mkdir(join(this.dir, d), { recursive: true, mode: 0o700 });
      ensurePrivateDir(join(this.dir, d), 'the jar cache directory');
    }
    for (const name of await readdir(join(this.dir, 'index'))) {
      if (!name.endsWith('.json')) continue;
      try {
        const entry = JSON.parse(await readFile(join(this.dir, 'index', name), 'utf8')) as CacheEntry;
        if (existsSync(this.blobPath(entry.sha256))) this.entries.set(name.slice(0, -5), entry);
        else await unlink(join(this.dir, 'index', name));
      } catch {
        await unlink(join(this.dir, 'index', name)).catch(() => undefined);
      }
    }
    this.log.info({ dir: this.dir, entries: this.entries.size }, 'jar cache ready');
  }

  lookup(key: string): CacheEntry | undefined {
    const e = this.entries.get(key);
    return e && existsSync(this.blobPath(e.sha256)) ? e : undefined;
  }

  /**
   * Whether the blob on disk still has the digest it is filed under, so a blob changed behind the
   * gateway's back never reaches the JobManager. A mismatch removes it.
   *
   * The bytes are hashed again unless the file is provably untouched since they last matched: same
   * device, inode, size, mtime and ctime (nanoseconds), and no other name for the inode. Any write,
   * truncate, chmod or `utimes` sets the ctime to now, and nothing but the clock can set it back, so
   * a file whose ctime did not move has not changed. A hard link handed to the JobManager (the
   * shared-dir hand-off) moves the ctime too; `hold`'s release checks the blob again in the
   * background once it is the only name left, so the next run of that jar needs no hashing.
   */
  async verifyBlob(sha256: string): Promise<boolean> {
    const running = this.verifying.get(sha256);
    if (running) return running;
    const check = this.check(sha256).finally(() => this.verifying.delete(sha256));
    this.verifying.set(sha256, check);
    return check;
  }

  private async check(sha256: string): Promise<boolean> {
    const path = this.blobPath(sha256);
    const before = await identity(path);
    if (before === undefined) {
      this.verified.delete(sha256);
      return false;
    }
    if (before.sole && this.verified.get(sha256) === before.key) return true;
    this.verified.delete(sha256);
    this.hashed++;
    // On the SHA-256 helper thread (ADR 0035), through its one read buffer: read back on this
    // thread with a stream of fresh buffers, a large jar would stall the event loop and leave its
    // buffers waiting for a collection.
    let actual: string;
    try {
      actual = await new FileDigest(path, 'sha256').digest(before.size);
    } catch {
      return false;
    }
    // The size too: the helper reads exactly the bytes the file had when the check began.
    const after = await identity(path);
    if (actual === sha256 && after?.size === before.size) {
      // Remembered only if nothing touched the file while it was read.
      if (after.sole && after.key === before.key) this.verified.set(sha256, after.key);
      return true;
    }
    this.log.error({ sha256, path }, 'a cached jar does not match its digest (changed on disk); removed, it will be downloaded again');
    for (const [key, e] of this.entries) {
      if (e.sha256 !== sha256) continue;
      this.entries.delete(key);
      await unlink(join(this.dir, 'index', `${key}.json`)).catch(() => undefined);
    }
    await unlink(path).catch(() => undefined);
    return false;
  }

  /**
   * Checks a released blob in the background (see `verifyBlob`: no read when its identity is
   * remembered) when it is the inode's only name; with another name a check could not be remembered.
   */
  private refresh(sha256: string): void {
    const job = identity(this.blobPath(sha256))
      .then((id) => (id?.sole ? this.verifyBlob(sha256) : undefined))
      .catch((err: unknown) => this.log.warn({ sha256, err: (err as Error).message }, 'background check of a cached jar failed'))
      .finally(() => this.refreshing.delete(job));
    this.refreshing.add(job);
  }

  /** Resolves once the background checks started so far have ended (for tests). */
  async settled(): Promise<void> {
    while (this.refreshing.size > 0) await Promise.all([...this.refreshing]);
  }

  /** Moves a verified download into place and records it. */
  async commit(key: string, tmpFile: string, entry: Omit<CacheEntry, 'fetchedAt' | 'lastUsed'>): Promise<CacheEntry> {
    const target = this.blobPath(entry.sha256);
    if (existsSync(target)) await unlink(tmpFile);
    else {
      await rename(tmpFile, target);
      // The caller hashed these bytes as it wrote them, in the cache's private tmp directory.
      const id = await identity(target);
      if (id?.sole) this.verified.set(entry.sha256, id.key);
    }
    const full: CacheEntry = { ...entry, fetchedAt: this.now(), lastUsed: this.now() };
    this.entries.set(key, full);
    await writeFile(join(this.dir, 'index', `${key}.json`), JSON.stringify(full), { mode: 0o600 });
    return full;
  }

  /**
   * A jar derived from cached ones (a job jar with nested artifacts), built once per `key` and
   * kept content-addressed like a download: an unchanged set is not built again. The result is
   * held until `release` is called.
   */
  async derived(
    key: string,
    build: (tmpFile: string) => Promise<{ sha256: string; size: number }>,
  ): Promise<{ path: string; sha256: string; release: () => void }> {
    const existing = this.lookup(key);
    if (existing && (await this.verifyBlob(existing.sha256))) {
      return { path: this.blobPath(existing.sha256), sha256: existing.sha256, release: this.hold(existing.sha256) };
    }
    const tmp = join(this.tmpDir, `derived-${randomBytes(8).toString('hex')}.jar`);
    try {
      const built = await build(tmp);
      const entry = await this.commit(key, tmp, { uri: `derived:${key}`, sha256: built.sha256, size: built.size });
      return { path: this.blobPath(entry.sha256), sha256: entry.sha256, release: this.hold(entry.sha256) };
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  /** Marks a blob in use until the returned function is called. */
  hold(sha256: string): () => void {
    this.inUse.set(sha256, (this.inUse.get(sha256) ?? 0) + 1);
    for (const e of this.entries.values()) if (e.sha256 === sha256) e.lastUsed = this.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = (this.inUse.get(sha256) ?? 1) - 1;
      if (n > 0) {
        this.inUse.set(sha256, n);
        return;
      }
      this.inUse.delete(sha256);
      this.refresh(sha256);
    };
  }

  /** Evicts least recently used blobs until the cache fits, skipping blobs in use. */
  async evict(): Promise<void> {
    const blobs = new Map<string, { size: number; lastUsed: number; keys: string[] }>();
    for (const [key, e] of this.entries) {
      const b = blobs.get(e.sha256) ?? { size: e.size, lastUsed: 0, keys: [] };
      b.lastUsed = Math.max(b.lastUsed, e.lastUsed);
      b.keys.push(key);
      blobs.set(e.sha256, b);
    }
    let total = 0;
    for (const sha of blobs.keys()) total += (await stat(this.blobPath(sha)).catch(() => ({ size: 0 }))).size;
    const order = [...blobs.entries()].sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [sha, b] of order) {
      if (total <= this.maxBytes) break;
      if (this.inUse.has(sha)) continue;
      await unlink(this.blobPath(sha)).catch(() => undefined);
      this.verified.delete(sha);
      for (const key of b.keys) {
        this.entries.delete(key);
        await unlink(join(this.dir, 'index', `${key}.json`)).catch(() => undefined);
      }
      total -= b.size;
      this.log.info({ sha256: sha, size: b.size }, 'evicted jar from cache');
    }
  }

  /** `hashed`: how many times a blob's bytes were read again to check them; `remembered`: blobs whose identity is remembered. */
  stats(): { entries: number; hashed: number; remembered: number } {
    return { entries: this.entries.size, hashed: this.hashed, remembered: this.verified.size };
  }
}

/**
 * What identifies a file's current bytes without reading them: device, inode, size, mtime and
 * ctime in nanoseconds; `sole` when the inode has no other name (no hard link handed out).
 */
async function identity(path: string): Promise<{ key: string; sole: boolean; size: number } | undefined> {
  try {
    const s = await stat(path, { bigint: true });
    return { key: `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`, sole: s.nlink === 1n, size: Number(s.size) };
  } catch {
    return undefined;
  }
}
