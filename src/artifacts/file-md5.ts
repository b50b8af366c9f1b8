import { Worker } from 'node:worker_threads';

/**
 * The store's MD5 of a downloaded object, computed on a helper thread from the file as it becomes
 * durable (ADR 0020). MD5 cannot be split (each block needs the one before it) and costs this
 * machine about 1.5 CPU-s per GiB, twice the SHA-256 the gateway computes anyway; on the download's
 * own thread the two digests together capped a fetch at ~470 MiB/s and, on a link, took 44–57 ms
 * after the last byte. On its own thread MD5 runs beside SHA-256, and the download's thread only
 * says how far the file is written.
 *
 * The helper thread reads the file through a descriptor of its own (by path), so it never touches
 * a buffer the download still uses and never outlives the descriptor it reads. One thread serves
 * every download of the process, in turns of at most `READ_BYTES`; it is started at the first use
 * and keeps the process alive only while a digest is pending.
 */

/** Bytes the helper reads per call; its only buffer. */
const READ_BYTES = 1024 * 1024;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const { openSync, readSync, closeSync } = require('node:fs');
const buf = Buffer.allocUnsafe(${READ_BYTES});
const sessions = new Map();
const drop = (id) => { const s = sessions.get(id); if (!s) return; sessions.delete(id); try { closeSync(s.fd); } catch {} };
parentPort.on('message', (m) => {
  if (m.op === 'start') {
    try { sessions.set(m.id, { fd: openSync(m.path, 'r'), at: 0, md5: createHash('md5') }); }
    catch (e) { parentPort.postMessage({ id: m.id, error: e.message }); }
    return;
  }
  const s = sessions.get(m.id);
  if (m.op === 'cancel' || !s) return drop(m.id);
  try {
    while (s.at < m.upTo) {
      const n = readSync(s.fd, buf, 0, Math.min(buf.length, m.upTo - s.at), s.at);
      if (n === 0) throw new Error('the file ended at ' + s.at + ' bytes, before ' + m.upTo);
      s.md5.update(buf.subarray(0, n));
      s.at += n;
    }
    if (m.op === 'digest') { parentPort.postMessage({ id: m.id, hex: s.md5.digest('hex') }); drop(m.id); }
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

let worker: Worker | undefined;
let nextId = 1;
const waiters = new Map<number, Waiter>();

function helper(): Worker {
  if (worker) return worker;
  const w = new Worker(WORKER_SOURCE, { eval: true, name: 'file-md5' });
  w.on('message', (r: Reply) => {
    const waiter = waiters.get(r.id);
    if (!waiter) return;
    forget(r.id);
    if ('hex' in r) waiter.resolve(r.hex);
    else waiter.reject(new Error(`the MD5 of the downloaded file could not be computed: ${r.error}`));
  });
  const lost = (err: Error) => {
    if (worker === w) worker = undefined;
    // Only its own sessions: an 'exit' after an 'error' may come when a new helper serves others.
    for (const [id, waiter] of waiters) {
      if (waiter.on !== w) continue;
      forget(id);
      waiter.reject(err);
    }
  };
  w.on('error', (err) => lost(new Error(`the MD5 helper thread failed: ${err.message}`)));
  w.on('exit', (code) => lost(new Error(`the MD5 helper thread exited (${code})`)));
  worker = w;
  // After the listeners (adding a 'message' listener takes a reference again).
  if (waiters.size === 0) w.unref();
  return w;
}

/**
 * A session is pending while it is in `waiters` (until its digest or failure came, or it was
 * cancelled): the helper thread holds the process open until the last one ends. A failure settles
 * the session at once; its result, rejected, waits for `digest()`.
 */
function remember(id: number, waiter: Waiter): void {
  waiters.set(id, waiter);
  if (waiters.size === 1) worker?.ref();
}

function forget(id: number): void {
  if (waiters.delete(id) && waiters.size === 0) worker?.unref();
}

/** One file's MD5 on the helper thread: `advance` as its prefix becomes durable, then `digest`. */
export class FileMd5 {
  private readonly id = nextId++;
  private posted = 0;
  private done = false;
  private readonly result: Promise<string>;

  /** `path` must exist; the helper opens it for reading. */
  constructor(path: string) {
    let resolve!: (hex: string) => void;
    let reject!: (err: Error) => void;
    this.result = new Promise<string>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.result.catch(() => undefined);
    const w = helper();
    remember(this.id, { resolve, reject, on: w });
    w.postMessage({ op: 'start', id: this.id, path });
  }

  /**
   * Every byte below `upTo` is written (durable) and final. Told at most once per `READ_BYTES`
   * of progress, so that a download of small chunks does not send a message per chunk.
   */
  advance(upTo: number): void {
    if (this.done || upTo < this.posted + READ_BYTES || !waiters.has(this.id)) return;
    this.posted = upTo;
    helper().postMessage({ op: 'advance', id: this.id, upTo });
  }

  /** The hex MD5 of the first `size` bytes (all of them durable). */
  digest(size: number): Promise<string> {
    if (!this.done) {
      this.done = true;
      // Already failed (and settled): nothing to ask for.
      if (waiters.has(this.id)) helper().postMessage({ op: 'digest', id: this.id, upTo: size });
    }
    return this.result;
  }

  /** Stops reading and closes the helper's descriptor (a download that failed or needs no digest). */
  cancel(): void {
    if (this.done) return;
    this.done = true;
    forget(this.id);
    worker?.postMessage({ op: 'cancel', id: this.id });
  }
}
