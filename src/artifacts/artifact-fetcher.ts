import { createHash, randomUUID } from 'node:crypto';
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type AuditLog, type AuditSubject, outcomeOf } from '../audit/audit-log';
import { type Clock, sleepOn, systemClock } from '../clock';
import { GatewayError } from '../errors/gateway-error';
import type { Writable } from 'node:stream';
import { downloadTo } from '../download/download';
import type { FetchProgress, FetchRecord } from './fetch-progress';
import type { ObjectStat } from '../plugin-kit/fs-plugin';
import type { CacheEntry, JarCache } from './jar-cache';
import type { PluginRegistry } from './plugin-registry';
import type { ParallelSettings } from '../download/ranged-download';
import type { FetchQueue } from './fetch-queue';
import type { UriAllowList } from './uri-allow-list';
import { checkUri, handoffName } from './uri-policy';
import { redactUri } from '../plugin-kit/uri';
import type { ZipLimits } from './zip-bounds';
import { zipProblem } from './zip-verify';

export interface FetcherOptions {
  plugins: PluginRegistry;
  cache: JarCache;
  slots: FetchQueue;
  progress: FetchProgress;
  allowedSchemes: readonly string[];
  /** `gateway.artifacts.allowed-uris`; absent or empty = any URI that passes the other checks. */
  allowList?: UriAllowList;
  /** Receives one record per fetch. */
  audit?: AuditLog;
  maxBytes: number;
  /** Zip-structure bounds a fetched jar must keep (the registry's defaults unless given). */
  zipLimits?: ZipLimits;
  timeoutMs: number;
  retries: number;
  /** Parallel ranged reads of large objects (`gateway.artifacts.parallel-fetch.*`); absent = one stream. */
  parallel?: ParallelSettings;
  progressIntervalMs: number;
  log: Logger;
  /** Aborted at shutdown. */
  shutdown?: AbortSignal;
  /**
   * Times the retry back-offs (the fetcher's and a ranged read's) and the lone-stream probe of a
   * parallel read; the system clock when absent.
   */
  clock?: Clock;
  /** Observes each fetch: plugin name, result, seconds, bytes downloaded. */
  onFetch?: (plugin: string, result: 'done' | 'cached' | 'failed', seconds: number, bytes: number) => void;
}

/** A verified jar in the cache, held (not evictable) until `release()`. */
export interface FetchedJar {
  path: string;
  sha256: string;
  size: number;
  version?: string;
  /** The store's ETag when it gave one (for the audit log). */
  etag?: string;
  /** Redacted URI, for provenance and logs. */
  uri: string;
  /** Hand-off file name derived from the URI. */
  name: string;
  fromCache: boolean;
  /**
   * True when every byte of this jar went to the tee given to `fetch` (this call downloaded it, and
   * the download attempt that fed the tee is the one that succeeded); false when the tee was never
   * opened or was destroyed.
   */
  teed: boolean;
  /** The policy checks it passed, for the audit log. */
  verdicts: Record<string, string>;
  release(): void;
}

const TRANSIENT = new Set(['GW_FETCH_UNAVAILABLE']);

type Fetched = CacheEntry & { fromCache: boolean; teed?: boolean };

export interface FetchOptions {
  sha256?: string;
  log?: Logger;
  audit?: AuditSubject & { jobId?: string };
  /**
   * Opens a second receiver of the downloaded bytes, an ordinary `Writable` (the pipelined upload
   * hand-off, ADR 0008), given the hand-off name. Called at the first byte, and only when this call
   * starts the download itself: not for a cached jar, nor for one another call is already
   * downloading. If the attempt that fed it fails, it is destroyed with the reason and a retry
   * downloads without it, so it never mixes the bytes of two attempts.
   */
  tee?: (name: string) => Writable;
}

/**
 * URI → verified jar on local disk. Policy first; then one shared download per URI at a time,
 * revalidated against the cache by version, ETag or Last-Modified; streamed to a temp file while
 * hashed; verified (size, store checksum, optional SHA-256 pin, zip structure); then renamed into
 * the content-addressed cache.
 */
export class ArtifactFetcher {
  private readonly inflight = new Map<string, Promise<Fetched>>();

  constructor(private readonly o: FetcherOptions) {}

  async fetch(rawUri: string, opts: FetchOptions = {}): Promise<FetchedJar> {
    const t0 = performance.now();
    const verdicts: Record<string, string> = {};
    // As checkUri parses it; '<unparseable URI>' when it does not parse.
    const redacted = redactUri(rawUri.length > 4096 ? '<too long>' : rawUri);
    try {
      const jar = await this.fetchChecked(rawUri, opts, verdicts);
      this.audit(opts.audit, {
        uri: jar.uri,
        ...(jar.version !== undefined ? { version: jar.version } : {}),
        ...(jar.etag !== undefined ? { etag: jar.etag } : {}),
        sha256: jar.sha256,
        size: jar.size,
        fromCache: jar.fromCache,
        verdicts,
        outcome: jar.fromCache ? 'cached' : 'fetched',
        durationMs: Math.round(performance.now() - t0),
      });
      return jar;
    } catch (err) {
      const { outcome, error } = outcomeOf(err);
      if (error === 'GW_FETCH_RESTRICTED_HOST') verdicts.connect = 'refused';
      if (error === 'GW_FETCH_URI_NOT_ALLOWED') verdicts.allowList = verdicts.connect ? 'refused a redirect target' : 'refused';
      this.audit(opts.audit, { uri: redacted, verdicts, outcome, error, durationMs: Math.round(performance.now() - t0) });
      throw err;
    }
  }

  private audit(
    subject: (AuditSubject & { jobId?: string }) | undefined,
    record: Omit<Parameters<AuditLog['fetch']>[0], 'principal' | 'reqId'>,
  ): void {
    if (!this.o.audit || !subject) return;
    this.o.audit.fetch({
      principal: subject.principal,
      reqId: subject.reqId,
      ...(subject.jobId ? { jobId: subject.jobId } : {}),
      ...record,
    });
  }

  private async fetchChecked(rawUri: string, opts: FetchOptions, verdicts: Record<string, string>): Promise<FetchedJar> {
    const uri = checkUri(rawUri, this.o.allowedSchemes, this.o.plugins);
    verdicts.scheme = 'allowed';
    verdicts.allowList = (this.o.allowList?.check(uri) ?? { verdict: 'not configured' }).verdict;
    const pin = opts.sha256?.trim().toLowerCase();
    if (pin !== undefined && !/^[0-9a-f]{64}$/.test(pin)) {
      throw new GatewayError('GW_FETCH_URI_INVALID', { uri: redactUri(uri), reason: 'the sha256 pin must be 64 hexadecimal characters' });
    }
    const key = createHash('sha256').update(uri.href).digest('hex');
    let shared = this.inflight.get(key);
    // Only the call that starts the download may tee it; the others hand off from the cache.
    const starter = !shared;
    if (!shared) {
      const tee = opts.tee;
      shared = this.fetchOnce(uri, key, pin, opts.log ?? this.o.log, tee && (() => tee(handoffName(uri)))).finally(() =>
        this.inflight.delete(key),
      );
      this.inflight.set(key, shared);
    }
    let entry: Fetched;
    try {
      entry = await shared;
    } finally {
      // Connect-time checks (restricted addresses, redirect targets) ran inside the fetch.
      verdicts.connect = 'checked';
    }
    verdicts.pin = pin === undefined ? 'none' : entry.sha256 === pin ? 'matched' : 'mismatch';
    if (pin !== undefined && entry.sha256 !== pin) {
      throw new GatewayError('GW_FETCH_DIGEST_MISMATCH', { uri: redactUri(uri), actual: entry.sha256, expected: pin });
    }
    verdicts.zip = 'ok';
    const release = this.o.cache.hold(entry.sha256);
    return {
      path: this.o.cache.blobPath(entry.sha256),
      sha256: entry.sha256,
      size: entry.size,
      ...(entry.version !== undefined ? { version: entry.version } : {}),
      ...(entry.etag !== undefined ? { etag: entry.etag } : {}),
      uri: redactUri(uri),
      name: handoffName(uri),
      fromCache: entry.fromCache,
      teed: starter && entry.teed === true,
      verdicts,
      release,
    };
  }

  private async fetchOnce(uri: URL, key: string, pin: string | undefined, log: Logger, openTee?: () => Writable): Promise<Fetched> {
    const fs = this.o.plugins.fileSystemFor(uri.protocol.replace(/:$/, '').toLowerCase())!;
    const rec = this.o.progress.start(redactUri(uri));
    const pluginName = this.o.plugins.pluginFor(uri.protocol.replace(/:$/, '').toLowerCase())?.name ?? 'unknown';
    const t0 = performance.now();
    const observe = (result: 'done' | 'cached' | 'failed', bytes: number) =>
      this.o.onFetch?.(pluginName, result, (performance.now() - t0) / 1000, bytes);
    const flog = log.child({ fetchId: rec.id, uri: rec.uri });
    const timeout = AbortSignal.timeout(this.o.timeoutMs);
    const signal = this.o.shutdown ? AbortSignal.any([timeout, this.o.shutdown]) : timeout;
    const release = await this.o.slots.acquire().catch((err: unknown) => {
      this.o.progress.finish(rec, { phase: 'failed', error: (err as Error).message });
      throw err;
    });
    try {
      rec.phase = 'checking';
      const stat = await this.retrying(() => fs.stat(uri, signal), signal, flog);
      if (stat.size !== undefined && stat.size > this.o.maxBytes) {
        throw new GatewayError('GW_FETCH_TOO_LARGE', { uri: rec.uri, limit: this.o.maxBytes });
      }
      const cached = this.o.cache.lookup(key);
      if (
        cached &&
        (isCurrent(cached, stat) || (pin !== undefined && cached.sha256 === pin)) &&
        (await this.o.cache.verifyBlob(cached.sha256))
      ) {
        flog.info({ sha256: cached.sha256 }, 'jar unchanged; using the cached copy');
        this.o.progress.finish(rec, { phase: 'cached', sha256: cached.sha256 });
        observe('cached', 0);
        return { ...cached, fromCache: true };
      }
      rec.total = stat.size;
      // The tee takes the bytes of the first attempt that delivers any. If that attempt fails it is
      // destroyed, and a retry downloads without it: a tee never mixes the bytes of two attempts.
      let tee = openTee;
      let teed = false;
      const entry = await this.retrying(
        async () => {
          const open = tee;
          let fed: Writable | undefined;
          try {
            const e = await this.download(uri, key, rec, stat, signal, flog, pin, open && (() => (fed = open())));
            teed = fed !== undefined;
            return e;
          } catch (err) {
            if (fed) {
              fed.destroy(err as Error);
              tee = undefined;
            }
            throw err;
          }
        },
        signal,
        flog,
      );
      this.o.progress.finish(rec, { phase: 'done', sha256: entry.sha256 });
      observe('done', entry.size);
      void this.o.cache.evict().catch((err: unknown) => flog.warn({ err: (err as Error).message }, 'cache eviction failed'));
      return { ...entry, fromCache: false, teed };
    } catch (err) {
      const e = timeout.aborted ? new GatewayError('GW_FETCH_TIMEOUT', { uri: rec.uri, timeoutMs: this.o.timeoutMs }, { cause: err }) : err;
      this.o.progress.finish(rec, { phase: 'failed', error: (e as Error).message });
      observe('failed', rec.bytes);
      throw e;
    } finally {
      release();
    }
  }

  private async download(
    uri: URL,
    key: string,
    rec: FetchRecord,
    stat: ObjectStat,
    signal: AbortSignal,
    log: Logger,
    sha256Pin: string | undefined,
    tee?: () => Writable,
  ): Promise<CacheEntry> {
    const tmp = join(this.o.cache.tmpDir, `${randomUUID()}.part`);
    rec.phase = 'downloading';
    rec.bytes = 0;
    const started = performance.now();
    const timer = setInterval(() => {
      const secs = (performance.now() - started) / 1000;
      log.info({ bytes: rec.bytes, total: rec.total, mibPerSec: Math.round((rec.bytes / 1048576 / secs) * 10) / 10 }, 'fetch in progress');
    }, this.o.progressIntervalMs).unref();
    try {
      const result = await downloadTo(this.o.plugins.fileSystemFor(uri.protocol.replace(/:$/, ''))!, uri, tmp, {
        signal,
        maxBytes: this.o.maxBytes,
        onProgress: (b) => (rec.bytes = b),
        stat,
        ...(this.o.parallel ? { parallel: this.o.parallel } : {}),
        rangeRetries: this.o.retries,
        log,
        ...(this.o.clock ? { clock: this.o.clock } : {}),
        ...(tee ? { tee } : {}),
        ...(sha256Pin !== undefined ? { sha256Pin } : {}),
      });
      // A body that ends early without a Content-Length is only caught by comparing with the size
      // the store announced before: treat it as a transient failure (retried), not as a bad jar.
      if (stat.size !== undefined && result.size !== stat.size) {
        throw new GatewayError('GW_FETCH_UNAVAILABLE', {
          uri: rec.uri,
          detail: `the store announced ${stat.size} bytes but sent ${result.size}`,
        });
      }
      rec.phase = 'verifying';
      const problem = await zipProblem(tmp, this.o.zipLimits);
      if (problem) {
        if (problem.limit) log.info({ limit: problem.limit, sha256: result.sha256 }, 'fetched jar refused: over a zip-structure bound');
        throw new GatewayError('GW_FETCH_NOT_JAR', { uri: rec.uri, reason: problem.reason });
      }
      const st = { ...stat, ...result.stat };
      const entry = await this.o.cache.commit(key, tmp, {
        uri: rec.uri,
        sha256: result.sha256,
        size: result.size,
        ...(st.etag !== undefined ? { etag: st.etag } : {}),
        ...(st.version !== undefined ? { version: st.version } : {}),
        ...(st.lastModified !== undefined ? { lastModified: st.lastModified } : {}),
      });
      const ms = performance.now() - started;
      log.info(
        {
          sha256: result.sha256,
          bytes: result.size,
          parts: result.parts,
          atOnce: result.atOnce,
          ms: Math.round(ms),
          mibPerSec: Math.round((result.size / 1048576 / (ms / 1000)) * 10) / 10,
        },
        'jar fetched',
      );
      return entry;
    } catch (err) {
      await unlink(tmp).catch(() => undefined); // no partial file is ever used
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC' || code === 'EDQUOT') {
        throw new GatewayError('GW_FETCH_DISK_FULL', { dir: this.o.cache.dir, uri: rec.uri }, { cause: err });
      }
      throw err;
    } finally {
      clearInterval(timer);
    }
  }

  /** Retries transient store failures with exponential backoff; everything else fails at once. */
  private async retrying<T>(fn: () => Promise<T>, signal: AbortSignal, log: Logger): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        const code = (err as { code?: string }).code ?? '';
        if (signal.aborted || attempt >= this.o.retries || !TRANSIENT.has(code)) throw err;
        const delay = 500 * 2 ** attempt;
        log.warn({ attempt: attempt + 1, delayMs: delay, code }, 'transient fetch failure; retrying');
        await sleepOn(this.o.clock ?? systemClock, delay, signal);
      }
    }
  }
}

/** Is a cached copy still what the store holds? Version beats ETag beats Last-Modified + size. */
function isCurrent(cached: CacheEntry, stat: ObjectStat): boolean {
  if (stat.version !== undefined) return cached.version === stat.version;
  if (stat.etag !== undefined) return cached.etag === stat.etag;
  if (stat.lastModified !== undefined && stat.size !== undefined)
    return cached.lastModified === stat.lastModified && cached.size === stat.size;
  return false;
}
