import { constants, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRegistry } from '../../src/composition';
import { passedOnBodyBytes, tuneV8, v8Options } from '../../src/v8-tuning';

const MiB = 1024 * 1024;

/** Passes `total` bytes of new 64 KiB Buffers on, each dropped at once, as a body relay does. */
function passOn(total: number): void {
  for (let moved = 0; moved < total; moved += 64 * 1024) {
    const chunk = Buffer.allocUnsafeSlow(64 * 1024);
    chunk[0] = 1;
    passedOnBodyBytes(chunk.length);
  }
}

describe('passedOnBodyBytes', () => {
  it('runs a young-generation collection every 16 MiB passed on, and that frees the dead chunks', async () => {
    tuneV8();
    let minor = 0;
    const observer = new PerformanceObserver((list) => {
      // A gc entry's `detail` (its kind) is not in the PerformanceEntry type.
      for (const e of list.getEntries() as (PerformanceEntry & { detail?: { kind?: number } })[])
        if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) minor++;
    });
    observer.observe({ entryTypes: ['gc'] });
    const base = process.memoryUsage().arrayBuffers;
    passOn(256 * MiB);
    // The chunks' memory is freed by V8's sweeper beside this thread after each collection; give it
    // time on a loaded machine. Without the pacing V8 leaves them until a full collection.
    let held = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 40 && held >= 32 * MiB; i++) {
      await sleep(50);
      held = process.memoryUsage().arrayBuffers - base;
    }
    observer.disconnect();
    expect({ minorCollections: minor >= 15, heldMiB: Math.round(held / MiB) < 32 }).toEqual({ minorCollections: true, heldMiB: true });
  });

  it('is a no-op for bytes below the interval', () => {
    expect(() => passedOnBodyBytes(1)).not.toThrow();
  });
});

describe('gateway.v8-tuning.enabled', () => {
  it('is on unless configured off, and documented with the rest of the options', () => {
    const registry = createRegistry();
    expect(registry.resolve(new Map()).get(v8Options.tuning)).toBe(true);
    expect(registry.resolve(new Map([['gateway.v8-tuning.enabled', { value: 'false', source: 'test' }]])).get(v8Options.tuning)).toBe(
      false,
    );
    expect(registry.toMarkdown()).toContain('gateway.v8-tuning.enabled');
  });

  it("leaves a flag given on node's command line as given, and sets the others", () => {
    expect(() => tuneV8(['--heap-growing-percent=50'])).not.toThrow();
  });
});
