import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { FileDigest } from '../../../src/download/file-digest';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'file-digest-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('FileDigest (SHA-256 and the store MD5 on helper threads, ADR 0035)', () => {
  it('hashes a file told in steps as it grows, exactly up to the size asked for', async () => {
    const path = join(dir, 'growing');
    const bytes = randomBytes(5 * 1024 * 1024 + 12345);
    writeFileSync(path, bytes.subarray(0, 1));
    const h = new FileDigest(path, 'md5');
    const s = new FileDigest(path, 'sha256');
    for (let at = 1; at < bytes.length; ) {
      const next = Math.min(bytes.length, at + 700_001);
      appendFileSync(path, bytes.subarray(at, next));
      h.advance(next);
      s.advance(next);
      at = next;
    }
    appendFileSync(path, Buffer.from('bytes past the object are not hashed'));
    expect(await h.digest(bytes.length)).toBe(md5(bytes));
    expect(await s.digest(bytes.length)).toBe(sha256(bytes));
  });

  it('serves several files at once, each with its own descriptor', async () => {
    const files = [1, 2, 3].map((i) => {
      const bytes = randomBytes(i * 1024 * 1024 + i);
      const path = join(dir, `many-${i}`);
      writeFileSync(path, bytes);
      return { bytes, h: new FileDigest(path, 'md5') };
    });
    for (const { bytes, h } of files) h.advance(bytes.length - 1);
    expect(await Promise.all(files.map(({ bytes, h }) => h.digest(bytes.length)))).toEqual(files.map(({ bytes }) => md5(bytes)));
  });

  it('fails the digest, not the process, for a file it cannot open or that ends early', async () => {
    await expect(new FileDigest(join(dir, 'absent'), 'md5').digest(10)).rejects.toThrow(
      /MD5 of the downloaded file could not be computed: ENOENT/,
    );
    await expect(new FileDigest(join(dir, 'absent'), 'sha256').digest(10)).rejects.toThrow(
      /SHA-256 of the downloaded file could not be computed: ENOENT/,
    );
    const path = join(dir, 'short');
    writeFileSync(path, randomBytes(100));
    await expect(new FileDigest(path, 'md5').digest(200)).rejects.toThrow(/the file ended at 100 bytes, before 200/);
    // The helper goes on serving.
    const ok = randomBytes(1000);
    writeFileSync(join(dir, 'after'), ok);
    expect(await new FileDigest(join(dir, 'after'), 'md5').digest(1000)).toBe(md5(ok));
  });

  it("a cancelled session's digest rejects instead of waiting forever", async () => {
    const path = join(dir, 'cancelled');
    writeFileSync(path, randomBytes(100));
    const h = new FileDigest(path, 'sha256');
    h.cancel();
    await expect(h.digest(100)).rejects.toThrow(/SHA-256 of the file was cancelled/);
  });

  it('holds the process open only while a digest is pending', () => {
    const path = join(dir, 'exit');
    const bytes = randomBytes(3 * 1024 * 1024);
    writeFileSync(path, bytes);
    const mod = resolve(__dirname, '../../../src/download/file-digest.ts');
    // A pending digest with nothing else to keep the loop alive is still delivered; a cancelled
    // session and an idle helper let the process end (the command would hang otherwise).
    const script = `
      const { FileDigest } = require(${JSON.stringify(mod)});
      new FileDigest(${JSON.stringify(path)}, 'md5').cancel();
      new FileDigest(${JSON.stringify(path)}, 'sha256').cancel();
      new FileDigest(${JSON.stringify(path)}, 'md5').digest(${bytes.length}).then((hex) => console.log(hex));
      new FileDigest(${JSON.stringify(path)}, 'sha256').digest(${bytes.length}).then((hex) => console.log(hex));`;
    // Node 24 (the project's) loads the TypeScript module as it is.
    const out = execFileSync(process.execPath, ['--no-warnings', '-e', script], { timeout: 20_000, encoding: 'utf8' });
    expect(out.trim().split('\n').sort()).toEqual([md5(bytes), sha256(bytes)].sort());
  });
});
