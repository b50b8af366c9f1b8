import { PassThrough, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { LoneStreamProbe, PROBE_WINDOW_MS } from '../../../src/download/ranged-download';
import type { Clock } from '../../../src/clock';
import { ManualClock } from '../../helpers/manual-clock';

// The verdict of a parallel read's first request, read alone (ranged-download.ts). The clock is
// driven by hand; the window's bytes are rate × PROBE_WINDOW_MS.

const MiB = 1024 * 1024;
const RATE = 100 * MiB; // bytes per second
const WINDOW_BYTES = (RATE * PROBE_WINDOW_MS) / 1000;

const setup = () => {
  const clock = new ManualClock();
  const probe = new LoneStreamProbe(RATE, clock);
  const abort = new AbortController();
  let verdict: boolean | undefined;
  void probe.verdict(abort.signal).then((v) => (verdict = v));
  return { clock, probe, abort, verdict: () => verdict };
};

describe('LoneStreamProbe: one stream or parallel ranges', () => {
  it("a first request that delivers the window's bytes inside the window is read alone", async () => {
    const { clock, probe, verdict } = setup();
    probe.opened();
    await clock.advance(PROBE_WINDOW_MS - 1);
    probe.progress(WINDOW_BYTES - 1);
    await clock.advance(0);
    expect(verdict()).toBeUndefined();
    probe.progress(WINDOW_BYTES);
    await clock.advance(0);
    expect(verdict()).toBe(true);
    expect(clock.pending()).toEqual([]); // the window's timer is cancelled
    expect(probe.mibPerSec).toBe(Math.round(WINDOW_BYTES / ((PROBE_WINDOW_MS - 1) / 1000) / MiB));
  });

  it("a first request still short of the window's bytes when the window closes starts the other requests", async () => {
    const { clock, probe, verdict } = setup();
    probe.opened();
    probe.progress(WINDOW_BYTES / 2);
    await clock.advance(PROBE_WINDOW_MS - 1);
    expect(verdict()).toBeUndefined();
    await clock.advance(1);
    expect(verdict()).toBe(false);
    probe.progress(WINDOW_BYTES); // too late: the verdict stands
    await clock.advance(0);
    expect(verdict()).toBe(false);
  });

  it('a window timer that fires early (Node times it from the loop time of the iteration that armed it) waits for the rest of the window', async () => {
    // The probe opens at 1 000.0 ms; the loop time when the timer was armed is taken as 999.3 ms.
    const clock = new ManualClock();
    // Each probe's first timer is armed 0.7 ms early; a timer armed later runs on time.
    const armedEarly = (): Clock => {
      let first = true;
      return {
        monotonicMs: () => clock.monotonicMs(),
        wallMs: () => clock.wallMs(),
        setTimer: (fn, ms) => {
          const early = first ? 0.7 : 0;
          first = false;
          return clock.setTimer(fn, ms - early);
        },
      };
    };
    const probe = new LoneStreamProbe(RATE, armedEarly());
    let verdict: boolean | undefined;
    void probe.verdict(new AbortController().signal).then((v) => (verdict = v));
    probe.opened();
    await clock.advance(PROBE_WINDOW_MS - 0.7); // the first timer fires here, 0.7 ms short
    expect(verdict).toBeUndefined();
    probe.progress(WINDOW_BYTES); // the window's bytes, inside the window
    await clock.advance(0);
    expect(verdict).toBe(true);

    const late = new LoneStreamProbe(RATE, armedEarly());
    let lateVerdict: boolean | undefined;
    void late.verdict(new AbortController().signal).then((v) => (lateVerdict = v));
    late.opened();
    await clock.advance(PROBE_WINDOW_MS - 0.7);
    expect(lateVerdict).toBeUndefined();
    await clock.advance(0.7); // the re-armed timer at the window's true end
    expect(lateVerdict).toBe(false);
    expect(clock.pending()).toEqual([]);
  });

  it('the window starts at the response headers, not at the request: latency alone does not decide', async () => {
    const { clock, probe, verdict } = setup();
    await clock.advance(5 * PROBE_WINDOW_MS); // a slow first byte
    expect(verdict()).toBeUndefined();
    probe.opened();
    await clock.advance(PROBE_WINDOW_MS / 2);
    probe.progress(WINDOW_BYTES);
    await clock.advance(0);
    expect(verdict()).toBe(true);
  });

  it('a first part shorter than the window is judged by its own rate when it ends', async () => {
    const fast = setup();
    fast.probe.opened();
    await fast.clock.advance(PROBE_WINDOW_MS / 2);
    fast.probe.ended(WINDOW_BYTES / 2); // exactly the rate
    await fast.clock.advance(0);
    expect(fast.verdict()).toBe(true);

    const slow = setup();
    slow.probe.opened();
    await slow.clock.advance(PROBE_WINDOW_MS / 2);
    slow.probe.ended(WINDOW_BYTES / 2 - 1);
    await slow.clock.advance(0);
    expect(slow.verdict()).toBe(false);
  });

  it('an abort settles the verdict as "not alone" (the workers then stop on the same signal)', async () => {
    const { clock, probe, abort, verdict } = setup();
    probe.opened();
    abort.abort(new Error('cancelled'));
    await clock.advance(0);
    expect(verdict()).toBe(false);
    expect(clock.pending()).toEqual([]);
  });

  it('only the first response starts the window (a retried first part does not restart it)', async () => {
    const { clock, probe, verdict } = setup();
    probe.opened();
    await clock.advance(PROBE_WINDOW_MS - 2);
    probe.opened();
    await clock.advance(2);
    expect(verdict()).toBe(false);
  });

  it("a body paused by the writer's backpressure inside the window is read alone: the gateway, not the link, is the limit", async () => {
    const { clock, probe, verdict } = setup();
    const body = new PassThrough();
    // A writer that never finishes its first write: everything after it waits in its buffer.
    const stuck = new Writable({ highWaterMark: 1024, write: () => undefined });
    void pipeline(body, stuck).catch(() => undefined);
    probe.watch(body);
    await clock.advance(PROBE_WINDOW_MS / 2);
    body.write(Buffer.alloc(512)); // far short of the window's bytes
    body.write(Buffer.alloc(2048));
    await new Promise((r) => setImmediate(r));
    await clock.advance(0);
    expect(verdict()).toBe(true);
    expect(probe.mibPerSec).toBeUndefined();
    body.destroy();
  });

  it('the window counts the bytes the body delivered, not those the file has taken', async () => {
    const { clock, probe, verdict } = setup();
    const body = new PassThrough();
    // A writer that takes each chunk at once: no backpressure, so only the delivered bytes decide.
    const sink = new Writable({ highWaterMark: 64 * MiB, write: (_c, _e, done) => done() });
    void pipeline(body, sink).catch(() => undefined);
    probe.watch(body);
    await clock.advance(PROBE_WINDOW_MS - 1);
    body.write(Buffer.alloc(WINDOW_BYTES - 1));
    await new Promise((r) => setImmediate(r));
    expect(verdict()).toBeUndefined();
    body.write(Buffer.alloc(1));
    await new Promise((r) => setImmediate(r));
    await clock.advance(0);
    expect(verdict()).toBe(true);
    body.end();
  });

  it('a pause after the window closed changes nothing', async () => {
    const { clock, probe, verdict } = setup();
    probe.opened();
    await clock.advance(PROBE_WINDOW_MS);
    probe.outran();
    await clock.advance(0);
    expect(verdict()).toBe(false);
  });
});
