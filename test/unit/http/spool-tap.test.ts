import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { SpoolTap } from '../../../src/http/spool-tap';

describe('SpoolTap', () => {
  let base: string;
  beforeEach(() => {
    base = mkdtempSync(`${tmpdir()}/spool-tap-`);
  });
  afterEach(() => rmSync(base, { recursive: true, force: true }));

  it('passes the bytes on unchanged, keeps a private copy, and hashes the copy on the helper thread', async () => {
    // Several MiB in 64 KiB pieces: the helper is told of the durable prefix as it grows.
    const bytes = randomBytes(5 * 1024 * 1024 + 123);
    const pieces = Array.from({ length: Math.ceil(bytes.length / 65536) }, (_, i) => bytes.subarray(i * 65536, (i + 1) * 65536));
    const tap = new SpoolTap(base);
    const passed: Buffer[] = [];
    await pipeline(
      Readable.from(pieces),
      tap,
      new Writable({
        write: (c: Buffer, _e, done) => {
          passed.push(c);
          done();
        },
      }),
    );
    expect(Buffer.concat(passed).equals(bytes)).toBe(true);
    expect(readFileSync(tap.path).equals(bytes)).toBe(true);
    await expect(tap.sha256()).resolves.toBe(createHash('sha256').update(bytes).digest('hex'));
    tap.discard();
    expect(existsSync(tap.path)).toBe(false);
  });

  it('hashes an empty upload', async () => {
    const tap = new SpoolTap(base);
    await pipeline(Readable.from([]), tap, new Writable({ write: (_c, _e, done) => done() }));
    await expect(tap.sha256()).resolves.toBe(createHash('sha256').digest('hex'));
    tap.discard();
  });

  it('a discarded copy has no digest: sha256() rejects instead of waiting', async () => {
    const tap = new SpoolTap(base);
    tap.write(randomBytes(2 * 1024 * 1024));
    tap.discard();
    await expect(tap.sha256()).rejects.toThrow(/cancelled/);
  });
});
