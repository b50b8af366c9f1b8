import { pipeline } from 'node:stream/promises';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from 'pino';
import { type Clock, sleepOn, systemClock, type TimerHandle } from '../clock';
import { GatewayError } from '../errors/gateway-error';
import { fetchError } from '../plugin-kit/fetch-error';
import type { FileSystem, ObjectStat, OpenOptions } from '../plugin-kit/fs-plugin';
import { ObjectFile, type Part, SEQUENTIAL_WRITE_BUFFER } from './object-file';
import { redactUri } from '../plugin-kit/uri';

/** `gateway.artifacts.parallel-fetch.*`. */
/** What a download wrote: the digest and size of the file, and how it was read. */
export interface DownloadResult {
  sha256: string;
  size: number;
  stat: ObjectStat;
  /** Ranged requests that read the object (1 for a single stream), retries not counted. */
  parts: number;
  /** Most ranged requests in flight at once (1: the object was read in one stream). */
  atOnce: number;
}

export interface ParallelSettings {
  /** Bytes per ranged request. */
  partSize: number;
  /** Ranged requests in flight at once; 1 = one stream. */
  concurrency: number;
  /**
   * Bytes per second a lone first request must deliver for the object to be read in one stream
   * (see `LoneStreamProbe`); absent or 0 = every request starts at once.
   */
  loneStreamRate?: number;
}

/**
 * How long the first request is read alone, from its response's headers, before the others start
 * (`LoneStreamProbe`): on a link capped per connection the delay costs about this much of one
 * round of requests.
 */
export const PROBE_WINDOW_MS = 10;

/**
 * A part asks for the next one ahead of its own end only when its request took at least this long
 * to be answered (`watchForEnd`): next to the store there is no round trip worth hiding.
 */
const AHEAD_MIN_LATENCY_MS = 5;

/** A stat that allows a pinned ranged read (see `rangedEligible`). */
export type RangedStat = ObjectStat & { size: number };

/** Gathered bytes per positional writev of one part (memory: concurrency × this, plus the sockets'). */
const PART_WRITE_BUFFER = 256 * 1024;

/** The last round's parts are this many times smaller than the others (see `planParts`). */
const LAST_ROUND_TAPER = 4;

/** One ranged request: bytes [start, end) of the object. */
export interface PartRange {
  start: number;
  end: number;
}

/**
 * How an object is cut into ranged requests, in the order they are issued.
 *
 * - Whole rounds: the number of parts is a multiple of the concurrency, so that the last round of
 *   requests is as full as the others (25 parts of 8 MiB on 8 requests leave 7 idle for the whole
 *   last round; 32 parts of 6.25 MiB do not). `partSize` is an upper bound.
 * - A short last round: the digest takes bytes in order, so while a round is read it can only
 *   follow its lowest part; the other parts of the last round are hashed after the last byte
 *   arrived, so that tail grows with the round's size. An object of at least half a round of full
 *   parts therefore ends with a round of parts `LAST_ROUND_TAPER` times smaller, and the rounds
 *   before it share the rest (for a smaller object the extra request would cost more than the
 *   tail). The tail after the last byte shrinks with the last round's parts, for the same number
 *   of requests.
 */
export function planParts(size: number, p: ParallelSettings): PartRange[] {
  const n = p.concurrency;
  const last = Math.ceil(p.partSize / LAST_ROUND_TAPER);
  const body = size >= 2 * n * last ? size - n * last : size;
  const rounds = Math.ceil(Math.ceil(body / p.partSize) / n);
  const length = Math.ceil(body / (rounds * n));
  const parts: PartRange[] = [];
  for (let start = 0; start < body; start += length) parts.push({ start, end: Math.min(body, start + length) });
  for (let start = body; start < size; start += last) parts.push({ start, end: Math.min(size, start + last) });
  return parts;
}

/**
 * Whether to read the object with parallel ranged requests: the plugin honours ranges, the store
 * pins them to a version or a strong ETag, and the object is at least two parts large.
 */
export function rangedEligible(fs: FileSystem, stat: ObjectStat, p: ParallelSettings): boolean {
  return (
    fs.supportsRange &&
    stat.pinnedRanges === true &&
    p.concurrency > 1 &&
    stat.size !== undefined &&
    stat.size >= 2 * p.partSize &&
    (stat.version !== undefined || stat.etag !== undefined)
  );
}

/**
 * Reads the object with up to `concurrency` ranged requests at once, each written at its offset
 * into one file (ObjectFile), every range pinned to the version or ETag `stat` saw. The digest
 * takes the bytes once, in order. A range that fails transiently is retried from its durable
 * prefix (`rangeRetries` times, short backoff); any other failure, the caller's abort, or the
 * object changing (`GW_FETCH_CHANGED`) stops every range, and the caller removes the file.
 */
export async function rangedDownload(
  fs: FileSystem,
  uri: URL,
  path: string,
  stat: RangedStat,
  opts: {
    signal: AbortSignal;
    maxBytes: number;
    onProgress: (bytes: number) => void;
    tee?: () => Writable;
    parallel: ParallelSettings;
    rangeRetries?: number;
    log?: Logger;
    sha256Pin?: string;
    clock?: Clock;
  },
): Promise<DownloadResult> {
  if (stat.size > opts.maxBytes) throw new GatewayError('GW_FETCH_TOO_LARGE', { uri: redactUri(uri), limit: opts.maxBytes });
  const clock = opts.clock ?? systemClock;
  const rate = opts.parallel.loneStreamRate ?? 0;
  const probe = rate > 0 ? new LoneStreamProbe(rate, clock) : undefined;
  const file = await ObjectFile.create(path, {
    uri,
    maxBytes: opts.maxBytes,
    integrity: stat.integrity,
    onProgress: opts.onProgress,
    writeBuffer: PART_WRITE_BUFFER,
    ...(opts.tee ? { openTee: opts.tee } : {}),
    ...(opts.sha256Pin !== undefined ? { sha256Pin: opts.sha256Pin } : {}),
  });
  const pin = stat.version !== undefined ? { version: stat.version } : { etag: stat.etag! };
  const plan = planParts(stat.size, opts.parallel);
  const parts: Part[] = [];
  // The first failure stops every other range.
  const stop = new AbortController();
  const signal = AbortSignal.any([opts.signal, stop.signal]);
  // Without a probe every part is queued at once; with one, only the first, until the probe decides.
  const queue: PartRange[] = probe ? plan.slice(0, 1) : plan;
  let next = 0;
  let firstError: unknown;
  // The probe's verdict (settled before any part after the first is read).
  let single = false;
  let decided: Promise<void> = Promise.resolve();
  // A worker reads parts one after another. A part whose end is one request latency away hands
  // its worker's place to a new worker (`watchForEnd`), so the next request is answered as this one
  // ends; never more than twice the concurrency are open at once.
  const running: Promise<void>[] = [];
  let open = 0;
  const worker = async () => {
    while (!signal.aborted) {
      if (next >= queue.length) await decided;
      if (next >= queue.length) return;
      const range = queue[next++]!;
      const part = file.part(range.start, range.end);
      parts.push(part);
      let handedOn = false;
      const nearEnd = () => {
        if (handedOn || single || open >= 2 * opts.parallel.concurrency || next >= queue.length || signal.aborted) return;
        handedOn = true;
        spawn();
      };
      open++;
      try {
        // The first part of a probed read, and the rest of an object read in one stream, are read
        // like a single stream: gathered into larger writes.
        const alone = probe !== undefined && (part.start === 0 || single);
        await readPart(fs, uri, file, part, {
          stat,
          pin,
          signal,
          retries: opts.rangeRetries ?? 0,
          log: opts.log,
          clock,
          writeBuffer: alone ? SEQUENTIAL_WRITE_BUFFER : PART_WRITE_BUFFER,
          nearEnd,
          ...(probe && part.start === 0 ? { probe } : {}),
        });
      } catch (err) {
        firstError ??= opts.signal.aborted ? (opts.signal.reason ?? err) : err;
        stop.abort(firstError);
      } finally {
        open--;
      }
      if (handedOn) return;
    }
  };
  const spawn = () => {
    running.push(worker());
  };
  for (let i = 0; i < (probe ? 1 : Math.min(opts.parallel.concurrency, plan.length)); i++) spawn();
  if (probe) {
    decided = probe.verdict(signal).then((fast) => {
      single = fast;
      if (fast) {
        // The rest of the object in one more request, once the first part is read.
        if (plan.length > 1) queue.push({ start: plan[0]!.end, end: stat.size });
        opts.log?.debug({ uri: redactUri(uri), mibPerSec: probe.mibPerSec }, 'the first ranged request is fast enough alone: one stream');
      } else {
        queue.push(...plan.slice(1));
        for (let i = 1; i < Math.min(opts.parallel.concurrency, plan.length); i++) spawn();
      }
    });
  }
  try {
    await decided;
    // Workers started while waiting are awaited too.
    for (let seen = 0; seen !== running.length; ) {
      seen = running.length;
      await Promise.all(running);
    }
    if (firstError !== undefined) throw firstError;
    if (opts.signal.aborted) throw opts.signal.reason;
    const result = await file.finish();
    if (result.size !== stat.size) throw fetchError.unavailable(uri, `the store announced ${stat.size} bytes but sent ${result.size}`);
    const problem = await file.integrityProblem();
    if (problem) throw fetchError.unavailable(uri, `the bytes do not match the store's checksum (${problem})`);
    return { ...result, stat, parts: parts.length, atOnce: single ? 1 : Math.min(opts.parallel.concurrency, plan.length) };
  } finally {
    await Promise.all(parts.map((p) => file.settled(p)));
    await file.close();
  }
}

interface PartContext {
  stat: RangedStat;
  pin: NonNullable<OpenOptions['pin']>;
  signal: AbortSignal;
  retries: number;
  log: Logger | undefined;
  clock: Clock;
  writeBuffer: number;
  /** Called about one request latency before the part's last byte (see `watchForEnd`). */
  nearEnd: () => void;
  /** Times this part's response (the first part's, while the others wait for the verdict). */
  probe?: LoneStreamProbe;
}

/** One range, resumed from its durable prefix after a transient failure. */
async function readPart(
  fs: FileSystem,
  uri: URL,
  file: ObjectFile,
  part: Part,
  { stat, pin, signal, retries, log, clock, writeBuffer, nearEnd, probe }: PartContext,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    await file.settled(part);
    const start = part.start + part.durable;
    if (start >= part.end) return;
    try {
      const asked = clock.monotonicMs();
      const opened = await fs.open(uri, { signal, range: { start, end: part.end - 1 }, pin });
      const latencyMs = clock.monotonicMs() - asked;
      const got = opened.stat;
      // A store that ignores the condition still names what it sent: hold it to the pin.
      if (
        (pin.version !== undefined && got.version !== undefined && got.version !== pin.version) ||
        (pin.etag !== undefined && got.etag !== undefined && got.etag !== pin.etag) ||
        (got.size !== undefined && got.size !== stat.size)
      ) {
        opened.stream.destroy();
        throw fetchError.changed(uri, `a range came from another version (${got.version ?? got.etag ?? `${got.size} bytes`})`);
      }
      const piped = pipeline(opened.stream, file.writer(part, writeBuffer), { signal });
      probe?.watch(opened.stream);
      if (latencyMs >= AHEAD_MIN_LATENCY_MS) watchForEnd(opened.stream, part.end - start, latencyMs, nearEnd, clock);
      await piped;
      await file.settled(part);
      probe?.ended(part.durable);
      if (part.durable !== part.end - part.start)
        throw fetchError.unavailable(uri, `the range at ${part.start} ended after ${part.durable} of ${part.end - part.start} bytes`);
      return;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (signal.aborted || attempt >= retries || code !== 'GW_FETCH_UNAVAILABLE') throw err;
      const delayMs = 200 * 2 ** attempt;
      log?.warn(
        { uri: redactUri(uri), start: part.start + part.durable, attempt: attempt + 1, delayMs, code },
        'ranged read failed; retrying the rest of the range',
      );
      await sleepOn(clock, delayMs, signal);
    }
  }
}

/**
 * Calls `nearEnd` about one request latency (`latencyMs`, what this range's request took to be
 * answered) before the range's last byte, as the rate seen so far predicts it: a request for the
 * next part sent then is answered as this one ends, instead of one round trip later, when each
 * part would otherwise end with its connection idle. The body comes in chunks of up to 1 MiB, which
 * on a capped connection can take longer than the latency, so the moment is predicted from each
 * chunk and kept by a timer, not waited for.
 */
function watchForEnd(body: Readable, bytes: number, latencyMs: number, nearEnd: () => void, clock: Clock): void {
  const began = clock.monotonicMs();
  let got = 0;
  let timer: TimerHandle | undefined;
  const done = () => {
    timer?.cancel();
    body.off('data', onData);
    body.off('close', done);
  };
  const fire = () => {
    done();
    nearEnd();
  };
  const onData = (chunk: Buffer) => {
    got += chunk.length;
    const elapsed = clock.monotonicMs() - began;
    // Time left at the rate so far (got / elapsed), less the next request's latency.
    const wait = ((bytes - got) * elapsed) / got - latencyMs;
    timer?.cancel();
    if (wait <= 0) fire();
    else timer = clock.setTimer(fire, wait);
  };
  body.on('data', onData);
  body.once('close', done);
}

/**
 * Decides whether a large object is read in one stream or with parallel ranged requests, from its
 * first request read alone for `PROBE_WINDOW_MS` after its response's headers. The request is fast
 * enough alone when, inside that window, its body arrives at `rate` bytes per second (over the
 * whole first part, when that is shorter), or arrives faster than the gateway takes it (the stream
 * is paused by the writer's backpressure: the file, the digest or the hand-off's tee is the limit,
 * and more connections would not move it). Otherwise the connection is capped somewhere on the
 * way, and the other requests start at once.
 *
 * Why: parallel requests pay off only where one connection is capped (a real network, a store
 * that limits each connection). Where the store sits next to the gateway, one stream is faster and
 * costs less CPU per byte: every byte is hashed from memory as it arrives, while the later parts
 * of a parallel read are read back from the file for the in-order digest, and the store serves
 * more requests (ADR 0035). The time a lone first request can cost on a
 * capped link is its latency plus the window.
 *
 * The bytes counted are those the body delivered (`watch`), not those written to the file: writes
 * are gathered into batches of up to 2 MiB that wait for the previous one (and, with the upload
 * hand-off, for the tee's room), so the file's progress moves in steps as large as the window's
 * bytes. Judged on it, a loopback read behind a hand-off's upload could be taken for a capped one
 * and read with several ranges.
 *
 * Time comes from the injected clock; the verdict is settled once.
 */
export class LoneStreamProbe {
  private openedAt: number | undefined;
  private timer: TimerHandle | undefined;
  private settle: ((fast: boolean) => void) | undefined;
  private readonly settled: Promise<boolean>;
  private decidedFast: boolean | undefined;
  /** Body bytes delivered since the first response's headers (every attempt of the first part). */
  private received = 0;
  /** The rate seen when the verdict was "fast" (for the log); undefined when backpressure decided. */
  mibPerSec: number | undefined;

  constructor(
    private readonly rate: number,
    private readonly clock: Clock,
  ) {
    this.settled = new Promise<boolean>((resolve) => (this.settle = resolve));
  }

  /** Resolves once: true to read the object in one stream. An abort decides "not alone" (no new request starts then anyway). */
  verdict(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) this.decide(false);
    else signal.addEventListener('abort', () => this.decide(false), { once: true });
    return this.settled;
  }

  /**
   * Times the first part's response body, piped already: its headers have arrived (the window
   * starts), each chunk it delivers counts, and a pause (the writer's backpressure) decides "fast".
   */
  watch(body: Readable): void {
    if (this.decidedFast !== undefined) return;
    this.opened();
    const onData = (chunk: Buffer) => this.progress(this.received + chunk.length);
    const onPause = () => this.outran();
    const stop = () => {
      body.off('data', onData);
      body.off('pause', onPause);
    };
    body.on('data', onData);
    body.on('pause', onPause);
    body.once('close', stop);
    void this.settled.then(stop);
  }

  /** The first part's response has arrived: the window starts. */
  opened(): void {
    if (this.openedAt !== undefined || this.decidedFast !== undefined) return;
    this.openedAt = this.clock.monotonicMs();
    this.armWindow(PROBE_WINDOW_MS);
  }

  /**
   * The window's end. Node runs a timer against the loop time of the iteration that armed it,
   * which can be earlier than the moment the window opened: such a timer fires up to that
   * iteration's length early (seen at 9.3 ms of 10, with 2 of the 3 MiB it needed), so an early
   * one waits for the rest of the window.
   */
  private armWindow(ms: number): void {
    this.timer = this.clock.setTimer(() => {
      const left = PROBE_WINDOW_MS - (this.clock.monotonicMs() - this.openedAt!);
      if (left > 0) this.armWindow(left);
      else this.decide(false);
    }, ms);
  }

  /** Body bytes of the first part delivered so far. */
  progress(bytes: number): void {
    this.received = bytes;
    if (this.openedAt === undefined || this.decidedFast !== undefined) return;
    if (bytes >= (this.rate * PROBE_WINDOW_MS) / 1000) this.judge(bytes);
  }

  /** The body was paused by the writer's backpressure inside the window: the link outruns the gateway. */
  outran(): void {
    if (this.openedAt === undefined || this.decidedFast !== undefined) return;
    this.decide(this.clock.monotonicMs() - this.openedAt <= PROBE_WINDOW_MS);
  }

  /** The first part is complete before the window closed: its rate over the part decides. */
  ended(bytes: number): void {
    if (this.decidedFast !== undefined) return;
    if (this.openedAt === undefined) this.decide(false);
    else this.judge(bytes);
  }

  private judge(bytes: number): void {
    const elapsedMs = Math.max(this.clock.monotonicMs() - this.openedAt!, 0);
    const fast = elapsedMs <= PROBE_WINDOW_MS && bytes * 1000 >= this.rate * elapsedMs;
    if (fast) this.mibPerSec = elapsedMs > 0 ? Math.round((bytes * 1000) / elapsedMs / 1048576) : undefined;
    this.decide(fast);
  }

  private decide(fast: boolean): void {
    if (this.decidedFast !== undefined) return;
    this.decidedFast = fast;
    this.timer?.cancel();
    this.settle!(fast);
  }
}
