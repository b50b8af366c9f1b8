import { passedOnBodyBytes, tuneV8 } from '../../src/v8-tuning';

const MiB = 1024 * 1024;

/** Passes `total` bytes of new 64 KiB Buffers on (and drops them); the most external memory seen at once. */
function passOn(total: number, pace: boolean): number {
  let most = 0;
  for (let moved = 0; moved < total; moved += 64 * 1024) {
    const chunk = Buffer.allocUnsafeSlow(64 * 1024);
    chunk[0] = 1;
    if (pace) passedOnBodyBytes(chunk.length);
    most = Math.max(most, process.memoryUsage().arrayBuffers);
  }
  return most;
}

describe('passedOnBodyBytes', () => {
  it('frees dead body chunks as they are passed on, where V8 alone lets them pile up until a full collection', () => {
    tuneV8();
    // Paced first: what the run without pacing leaves behind only a full collection frees.
    const base = process.memoryUsage().arrayBuffers;
    const paced = passOn(384 * MiB, true) - base;
    const alone = passOn(384 * MiB, false) - base;
    // Paced every 16 MiB: ~20–60 MiB (the sweeper that frees the chunks' memory after each young
    // collection runs beside this tight loop and lags it). V8 alone: 130–380 MiB.
    expect({ pacedMiB: Math.round(paced / MiB), below: paced < 96 * MiB && paced < alone / 2 }).toEqual({ pacedMiB: Math.round(paced / MiB), below: true });
  });

  it('is a no-op for bytes below the interval', () => {
    expect(() => passedOnBodyBytes(1)).not.toThrow();
  });
});
