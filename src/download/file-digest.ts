import { Worker } from 'node:worker_threads';

/**
 * A digest of a downloaded object, computed on a helper thread from the file as it becomes durable
 * (ADR 0035): the SHA-256 every fetch computes, and the store's MD5 when one is checked.
 *
 * On the download's own thread the digests capped a fast fetch: each costs more CPU per byte than
 * the rest of the download (socket to file), MD5 most (ADR 0035).
 * On their own threads the digests run beside the download, and the download's thread only says
 * how far the file is written.
 *
 * The helper thread reads the file through a descriptor of its own (by path), so it never touches
 * a buffer the download still uses and never outlives the descriptor it reads. One thread per
 * algorithm serves every download of the process, in turns of at most `READ_BYTES`; each is started
 * at its first use and keeps the process alive only while a digest is pending.
 */

export type DigestAlgorithm = 'sha256' | 'md5';

/** Bytes the helper reads per call; its only buffer. */
const READ_BYTES = 1024 * 1024;

const WORKER_SOURCE = `
const { parentPort, workerData: algorithm } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const { openSync, readSync, closeSync } = require('node:fs');
const buf = Buffer.allocUnsafe(${READ_BYTES});
const sessions = new Map();
const drop = (id) => { const s = sessions.get(id); if (!s) return; sessions.delete(id); try { closeSync(s.fd); } catch {} };
parentPort.on('message', (m) => {
  if (m.op === 'start') {
    try { sessions.set(m.id, { fd: openSync(m.path, 'r'), at: 0, hash: createHash(algorithm) }); }
    catch (e) { parentPort.postMessage({ id: m.id, error: e.message }); }
    return;
  }
  const s = sessions.get(m.id);
  if (m.op === 'cancel' || !s) return drop(m.id);
  try {
    while (s.at < m.upTo) {
      const n = readSync(s.fd, buf, 0, Math.min(buf.length, m.upTo - s.at), s.at);
      if (n === 0) throw new Error('the file ended at ' + s.at + ' bytes, before ' + m.upTo);
      s.hash.update(buf.subarray(0, n));
      s.at += n;
    }
    if (m.op === 'digest') { parentPort.postMessage({ id: m.id, hex: s.hash.digest('hex') }); drop(m.id); }
  } catch (e) {
    parentPort.postMessage({ id: m.id, error: e.message });
    drop(m.id);
  }
});
`;

type Reply = { id: number; hex: string } | { id: number; error: string };

interface Waiter {
  resolve: (hex: string) => void;
  reject: (err: Error) => void;
  /** The helper thread that holds the session. */
  on: Worker;
}

/** The helper thread of each algorithm, while it lives. */
const workers = new Map<DigestAlgorithm, Worker>();
let nextId = 1;
const waiters = new Map<number, Waiter>();

const NAMES: Record<DigestAlgorithm, string> = { sha256: 'SHA-256', md5: 'MD5' };

function helper(algorithm: DigestAlgorithm): Worker {
  const running = workers.get(algorithm);
  if (running) return running;
  const w = new Worker(WORKER_SOURCE, { eval: true, name: `file-${algorithm}`, workerData: algorithm });
  w.on('message', (r: Reply) => {
    const waiter = waiters.get(r.id);
    if (!waiter) return;
    forget(r.id);
    if ('hex' in r) waiter.resolve(r.hex);
    else waiter.reject(new Error(`the ${NAMES[algorithm]} of the downloaded file could not be computed: ${r.error}`));
  });
  const lost = (err: Error) => {
    if (workers.get(algorithm) === w) workers.delete(algorithm);
    // Only its own sessions: an 'exit' after an 'error' may come when a new helper serves others.
    for (const [id, waiter] of waiters) {
      if (waiter.on !== w) continue;
      forget(id);
      waiter.reject(err);
    }
  };
  w.on('error', (err) => lost(new Error(`the ${NAMES[algorithm]} helper thread failed: ${err.message}`)));
  w.on('exit', (code) => lost(new Error(`the ${NAMES[algorithm]} helper thread exited (${code})`)));
  workers.set(algorithm, w);
  // After the listeners (adding a 'message' listener takes a reference again).
  if (!pendingOn(w)) w.unref();
  return w;
}

function pendingOn(w: Worker): boolean {
  for (const waiter of waiters.values()) if (waiter.on === w) return true;
  return false;
}

/**
 * A session is pending while it is in `waiters` (until its digest or failure came, or it was
 * cancelled): its helper thread holds the process open until its last one ends. A failure settles
 * the session at once; its result, rejected, waits for `digest()`.
 */
function remember(id: number, waiter: Waiter): void {
  waiters.set(id, waiter);
  waiter.on.ref();
}

function forget(id: number): void {
  const waiter = waiters.get(id);
  if (!waiter) return;
  waiters.delete(id);
  if (!pendingOn(waiter.on)) waiter.on.unref();
}

/** One file's digest on a helper thread: `advance` as its prefix becomes durable, then `digest`. */
export class FileDigest {
  private readonly id = nextId++;
  private posted = 0;
  private done = false;
  private readonly result: Promise<string>;
  private readonly on: Worker;
  private readonly fail: (err: Error) => void;
  readonly algorithm: DigestAlgorithm;

  /** `path` must exist; the helper opens it for reading. */
  constructor(path: string, algorithm: DigestAlgorithm) {
    this.algorithm = algorithm;
    let resolve!: (hex: string) => void;
    let reject!: (err: Error) => void;
    this.result = new Promise<string>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.result.catch(() => undefined);
    this.fail = reject;
    this.on = helper(algorithm);
    remember(this.id, { resolve, reject, on: this.on });
    this.on.postMessage({ op: 'start', id: this.id, path });
  }

  /**
   * Every byte below `upTo` is written (durable) and final. Told at most once per `READ_BYTES`
   * of progress, so that a download of small chunks does not send a message per chunk.
   */
  advance(upTo: number): void {
    if (this.done || upTo < this.posted + READ_BYTES || !waiters.has(this.id)) return;
    this.posted = upTo;
    this.on.postMessage({ op: 'advance', id: this.id, upTo });
  }

  /** The hex digest of the first `size` bytes (all of them durable). */
  digest(size: number): Promise<string> {
    if (!this.done) {
      this.done = true;
      // Already failed (and settled): nothing to ask for.
      if (waiters.has(this.id)) this.on.postMessage({ op: 'digest', id: this.id, upTo: size });
    }
    return this.result;
  }

  /** Stops reading and closes the helper's descriptor (a download that failed or needs no digest); `digest` then rejects. */
  cancel(): void {
    if (this.done) return;
    this.done = true;
    forget(this.id);
    this.fail(new Error(`the ${NAMES[this.algorithm]} of the file was cancelled`));
    this.on.postMessage({ op: 'cancel', id: this.id });
  }
}
