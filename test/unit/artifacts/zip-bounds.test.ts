import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { JarInspector } from '../../../src/artifacts/jar-inspector';
import { DEFAULT_ZIP_LIMITS, ManifestScanner, ZIP_TAIL, type ZipLimits } from '../../../src/artifacts/zip-bounds';
import { inspectJar, zipProblem } from '../../../src/artifacts/zip-verify';
import { craftZip, decoyEndRecord } from '../../helpers/hostile-jars';
import { buildJar } from '../../helpers/jars';

const MANIFEST = 'Manifest-Version: 1.0\nMain-Class: a.B\n';
const GiB = 1024 ** 3;

/**
 * The upload path (JarStreamStorage): JarInspector over the bytes in `chunk`-sized pieces, then,
 * if it passed, `inspectJar` on the spooled copy.
 */
async function streamed(bytes: Buffer, limits?: ZipLimits, chunk = 7) {
  const inspector = new JarInspector(limits);
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += chunk) chunks.push(bytes.subarray(i, i + chunk));
  await pipeline(Readable.from(chunks), inspector, new Writable({ write: (_c, _e, d) => d() }));
  const v = inspector.verdict();
  if (!v.ok) return { reason: v.reason, ...(v.limit ? { limit: v.limit } : {}) };
  const path = join(dir, `u${n++}.jar`);
  writeFileSync(path, bytes);
  const { problem } = await inspectJar(path, limits);
  return problem && { reason: problem.reason, ...(problem.limit ? { limit: problem.limit } : {}) };
}

/** ManifestScanner over the bytes in `chunk`-sized pieces. */
function scanned(bytes: Buffer, chunk: number) {
  const scanner = new ManifestScanner(DEFAULT_ZIP_LIMITS.maxManifestSize);
  for (let i = 0; i < bytes.length; i += chunk) scanner.push(bytes.subarray(i, i + chunk));
  return scanner.oversizedFrom(0);
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gw-zip-bounds-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The fetch path: zipProblem on a file. */
let n = 0;
async function onDisk(bytes: Buffer, limits?: ZipLimits) {
  const path = join(dir, `j${n++}.jar`);
  writeFileSync(path, bytes);
  return zipProblem(path, limits);
}

/** Both paths must agree: refused with the same reason, or both accepted. */
async function both(bytes: Buffer, limits?: ZipLimits) {
  const results = await Promise.all([streamed(bytes, limits, 7), streamed(bytes, limits, 65_536), onDisk(bytes, limits)]);
  for (const r of results.slice(1)) expect(r).toEqual(results[0]);
  return results[0];
}

describe('zip-structure bounds (uploads: JarInspector; fetched jars: zipProblem)', () => {
  it("the defaults are the registry's", () => {
    expect(DEFAULT_ZIP_LIMITS).toEqual({ maxEntries: 500_000, maxCentralDirectorySize: 64 * 1024 ** 2, maxManifestSize: 1024 ** 2 });
  });

  it('accepts a genuine jar, a zip64 one, and one holding a nested jar whose own manifest is oversized', async () => {
    expect(await both(buildJar({ 'META-INF/MANIFEST.MF': MANIFEST, 'a/B.class': 'x' }))).toBeUndefined();
    expect(
      await both(
        craftZip({
          entries: [
            { name: 'META-INF/MANIFEST.MF', data: MANIFEST },
            { name: 'a/B.class', data: 'x' },
          ],
          zip64: {},
        }),
      ),
    ).toBeUndefined();
    // The nested jar is only data to the outer jar's central directory: not the JobManager's business.
    const nested = craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST, declaredSize: 2 * GiB }] });
    expect(
      await both(buildJar({ 'META-INF/MANIFEST.MF': MANIFEST, 'lib/nested.jar': nested, 'big.bin': randomBytes(100_000) })),
    ).toBeUndefined();
  });

  describe('entries in the central directory', () => {
    it('refuses an end record that declares more entries than the limit', async () => {
      const jar = craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST }], eocdEntries: 60_000 });
      expect(await both(jar, { ...DEFAULT_ZIP_LIMITS, maxEntries: 1000 })).toEqual({
        limit: 'gateway.artifacts.max-zip-entries',
        reason:
          'its central directory declares 60000 entries, more than gateway.artifacts.max-zip-entries (1000); if the jar is genuine, raise gateway.artifacts.max-zip-entries',
      });
      // At the limit the bound passes (the walk of the directory then finds 1 entry, not 60000, and refuses the zip itself).
      expect((await streamed(jar, { ...DEFAULT_ZIP_LIMITS, maxEntries: 60_000 }))?.limit).toBeUndefined();
    });

    it('refuses a zip64 end record that declares 4 billion entries, with the default limits', async () => {
      const jar = craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST }], zip64: { entries: 2n ** 32n } });
      expect(await both(jar)).toMatchObject({
        limit: 'gateway.artifacts.max-zip-entries',
        reason: expect.stringContaining('declares 4294967296 entries'),
      });
    });

    it('is not fooled by a decoy end record in the comment (Java skips one whose comment length does not fit)', async () => {
      const jar = craftZip({
        entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST }],
        zip64: { entries: 2n ** 40n },
        comment: Buffer.concat([Buffer.from('built by '), decoyEndRecord()]),
      });
      expect(await streamed(jar, undefined, 65_536)).toMatchObject({ limit: 'gateway.artifacts.max-zip-entries' });
      expect(await onDisk(jar)).toBeDefined(); // yauzl refuses a comment length that does not fit, too
    });
  });

  describe('central directory size', () => {
    it('refuses an end record that declares a 4 GiB central directory', async () => {
      const jar = craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST }], eocdCdSize: 0xfffffff0 });
      expect(await both(jar)).toEqual({
        limit: 'gateway.artifacts.max-central-directory-size',
        reason: `its central directory is ${0xfffffff0} bytes, more than gateway.artifacts.max-central-directory-size (67108864 bytes); if the jar is genuine, raise gateway.artifacts.max-central-directory-size`,
      });
    });

    it('refuses a zip64 end record that declares a 1 TiB central directory', async () => {
      const jar = craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST }], zip64: { cdSize: 2n ** 40n } });
      expect(await both(jar)).toMatchObject({
        limit: 'gateway.artifacts.max-central-directory-size',
        reason: expect.stringContaining(`is ${2 ** 40} bytes`),
      });
    });

    it('applies a lowered limit to a genuine central directory', async () => {
      const jar = buildJar({ 'META-INF/MANIFEST.MF': MANIFEST, 'a.txt': 'a', 'b.txt': 'b' });
      expect(await both(jar, { ...DEFAULT_ZIP_LIMITS, maxCentralDirectorySize: 100 })).toMatchObject({
        limit: 'gateway.artifacts.max-central-directory-size',
      });
    });

    it('refuses a zip64 locator that points far before the end, where the record cannot be checked', async () => {
      const jar = craftZip({
        entries: [
          { name: 'big.bin', data: randomBytes(ZIP_TAIL + 10_000) },
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST },
        ],
        zip64: { recordAt: 100n },
      });
      expect(await both(jar)).toEqual({ reason: expect.stringMatching(/^its zip64 end record lies \d+ bytes before the zip64 locator/) });
    });
  });

  describe('META-INF/MANIFEST.MF size, as the central directory declares it', () => {
    it('refuses a manifest declared at 2 GiB uncompressed (nothing is inflated)', async () => {
      const jar = craftZip({
        entries: [
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST, declaredSize: 2 * GiB },
          { name: 'a/B.class', data: 'x' },
        ],
      });
      expect(await both(jar)).toEqual({
        limit: 'gateway.artifacts.max-manifest-size',
        reason: `its central directory declares a META-INF/MANIFEST.MF of ${2 * GiB} bytes uncompressed, more than gateway.artifacts.max-manifest-size (1048576 bytes); the JobManager reads the manifest whole. If the jar is genuine, raise gateway.artifacts.max-manifest-size`,
      });
    });

    it('matches the name in any letter case, as Java does, and reads the zip64 size', async () => {
      expect(await both(craftZip({ entries: [{ name: 'meta-inf/Manifest.mf', data: MANIFEST, declaredSize: 2 * GiB }] }))).toMatchObject({
        limit: 'gateway.artifacts.max-manifest-size',
      });
      expect(
        await both(craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST, zip64Size: 2n ** 33n }], zip64: {} })),
      ).toMatchObject({
        limit: 'gateway.artifacts.max-manifest-size',
        reason: expect.stringContaining(`of ${2 ** 33} bytes`),
      });
    });

    it('refuses any of duplicate manifest entries, and only manifest entries', async () => {
      const dup = craftZip({
        entries: [
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST },
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST, declaredSize: 5 * 1024 ** 2 },
        ],
      });
      expect(await both(dup)).toMatchObject({ limit: 'gateway.artifacts.max-manifest-size' });
      const other = craftZip({
        entries: [
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST },
          { name: 'META-INF/MANIFEST.MX', data: 'x', declaredSize: 2 * GiB },
        ],
      });
      // Not the manifest: the bound passes (the walk refuses the crafted entry's sizes for itself).
      expect((await streamed(other))?.limit).toBeUndefined();
    });

    it('compares with the limit exactly', async () => {
      const limits = { ...DEFAULT_ZIP_LIMITS, maxManifestSize: 1000 };
      expect(await both(craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: 'x'.repeat(1000) }] }), limits)).toBeUndefined();
      expect(await both(craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: 'x'.repeat(1001) }] }), limits)).toMatchObject({
        limit: 'gateway.artifacts.max-manifest-size',
      });
    });

    it('finds the header wherever chunk boundaries fall', async () => {
      const jar = craftZip({
        entries: [
          { name: 'a.bin', data: randomBytes(3000) },
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST, zip64Size: 2n ** 33n },
        ],
        zip64: {},
      });
      const fine = craftZip({
        entries: [
          { name: 'a.bin', data: randomBytes(3000) },
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST, zip64Size: 2n ** 10n },
        ],
        zip64: {},
      });
      for (const chunk of [1, 2, 3, 4, 5, 45, 46, 47, 65, 66, 67, 77, 78, 79, 1000]) {
        expect({ chunk, r: scanned(jar, chunk) }).toMatchObject({ chunk, r: { limit: 'gateway.artifacts.max-manifest-size' } });
        expect({ chunk, r: scanned(fine, chunk) }).toEqual({ chunk, r: undefined });
      }
      // Behind a large entry, with the central directory beyond the 64 KiB tail window.
      const big = craftZip({
        entries: [
          { name: 'big.bin', data: randomBytes(300_000) },
          { name: 'META-INF/MANIFEST.MF', data: MANIFEST, declaredSize: 2 * GiB },
          ...Array.from({ length: 2000 }, (_, i) => ({ name: `pad/${i}.class`.padEnd(60, 'x'), data: 'x' })),
        ],
      });
      expect(await both(big)).toMatchObject({ limit: 'gateway.artifacts.max-manifest-size' });
    });
  });

  it('fetched jars: refuses a manifest that inflates past its declared size (a manifest bomb), reading at most that much', async () => {
    const bomb = Buffer.alloc(64 * 1024 ** 2, 0x41); // 64 MiB of 'A' deflates to ~64 KiB
    const jar = craftZip({
      entries: [
        { name: 'META-INF/MANIFEST.MF', data: bomb, deflate: true, declaredSize: 100 },
        { name: 'a/B.class', data: 'x' },
      ],
    });
    expect(jar.length).toBeLessThan(200 * 1024);
    const r = await onDisk(jar);
    expect(r).toMatchObject({ limit: 'gateway.artifacts.max-manifest-size' });
    expect(r?.reason).toMatch(/the manifest does not inflate to its declared 100 bytes/);
    // The same manifest, honestly declared, is refused by the declared-size bound instead.
    expect(await onDisk(craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: bomb, deflate: true }] }))).toMatchObject({
      limit: 'gateway.artifacts.max-manifest-size',
    });
    // A genuine deflated manifest passes.
    expect(
      await onDisk(
        craftZip({
          entries: [
            { name: 'META-INF/MANIFEST.MF', data: MANIFEST, deflate: true },
            { name: 'a/B.class', data: 'x' },
          ],
        }),
      ),
    ).toBeUndefined();
  });

  it('keeps the format reasons: empty, no end record, no entries', async () => {
    expect(await streamed(Buffer.alloc(0))).toEqual({ reason: 'the file is empty' });
    const jar = buildJar({ 'big.bin': randomBytes(100_000) });
    expect(await both(jar.subarray(0, jar.length - 30))).toEqual({ reason: expect.stringContaining('end-of-central-directory') });
    expect(await streamed(craftZip({ entries: [{ name: 'a', data: 'b' }], eocdEntries: 0 }))).toEqual({ reason: 'the zip has no entries' });
  });
});
