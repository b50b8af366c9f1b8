import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';
import { JarInspector } from '../../../src/artifacts/jar-inspector';
import { buildJar } from '../../helpers/jars';

async function inspect(bytes: Buffer, chunk = 7) {
  const inspector = new JarInspector();
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += chunk) chunks.push(bytes.subarray(i, i + chunk));
  await pipeline(Readable.from(chunks), inspector, new Writable({ write: (_c, _e, d) => d() }));
  return inspector.verdict();
}

describe('JarInspector', () => {
  it('accepts a real jar and hashes it', async () => {
    const jar = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'a.txt': 'x' });
    const v = await inspect(jar);
    expect(v).toEqual({ ok: true, size: jar.length, sha256: createHash('sha256').update(jar).digest('hex') });
  });

  it('refuses random bytes', async () => {
    expect(await inspect(randomBytes(10_000))).toMatchObject({ ok: false, reason: expect.stringContaining('local file header') });
  });

  it('refuses a truncated zip', async () => {
    const jar = buildJar({ 'big.bin': randomBytes(100_000) });
    expect(await inspect(jar.subarray(0, jar.length - 30))).toMatchObject({
      ok: false,
      reason: expect.stringContaining('end-of-central-directory'),
    });
  });

  it('refuses an empty file', async () => {
    expect(await inspect(Buffer.alloc(0))).toMatchObject({ ok: false, reason: 'the file is empty' });
  });

  it('finds the end record behind a long comment in a large stream', async () => {
    const jar = buildJar({ 'big.bin': randomBytes(300_000) }, 'c'.repeat(60_000));
    expect((await inspect(jar, 65_536)).ok).toBe(true);
  });
});
