import { planParts } from '../../../src/download/ranged-download';

const MiB = 1024 * 1024;
const lengths = (size: number, partSize: number, concurrency: number) =>
  planParts(size, { partSize, concurrency }).map((p) => p.end - p.start);

describe('planParts: how a ranged read cuts an object', () => {
  it('tiles every object exactly, in offset order, never over the part size', () => {
    for (const [size, partSize, concurrency] of [
      [209_750_548, 16 * MiB, 8],
      [209_750_548, 8 * MiB, 8],
      [100 * 1000 * 1000 + 7, 16 * MiB, 8],
      [33 * MiB, 16 * MiB, 8],
      [3 * MiB + 777, 256 * 1024, 4],
      [1_000_003, 64 * 1024, 3],
    ] as const) {
      const parts = planParts(size, { partSize, concurrency });
      expect(parts[0]!.start).toBe(0);
      expect(parts.at(-1)!.end).toBe(size);
      for (let i = 1; i < parts.length; i++) expect(parts[i]!.start).toBe(parts[i - 1]!.end);
      expect(parts.every((p) => p.end > p.start && p.end - p.start <= partSize)).toBe(true);
      expect(parts.length % concurrency).toBe(0);
    }
  });

  it('ends a 200 MB object with a round of quarter-size parts (the defaults: 16 MiB, 8 requests)', () => {
    const l = lengths(209_750_548, 16 * MiB, 8);
    expect(l).toHaveLength(24);
    expect(l.slice(-8)).toEqual(Array(8).fill(4 * MiB));
    expect(new Set(l.slice(0, 15))).toEqual(new Set([Math.ceil((209_750_548 - 32 * MiB) / 16)]));
  });

  it('tapers an object of half a round or more, and cuts a smaller one into one even round', () => {
    expect(lengths(64 * MiB, 16 * MiB, 8)).toEqual([...Array(8).fill(4 * MiB), ...Array(8).fill(4 * MiB)]);
    expect(lengths(40 * MiB, 16 * MiB, 8)).toEqual(Array(8).fill(5 * MiB));
  });
});
