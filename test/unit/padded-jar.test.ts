import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { zipProblem } from '../../src/artifacts/zip-verify';
import { buildJar } from '../helpers/jars';
import { writePaddedJar } from '../helpers/padded-jar';

describe('writePaddedJar (test and bench helper)', () => {
  it('writes a valid zip with the original entries and the padding', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'padded-'));
    try {
      const src = join(dir, 'src.jar');
      writeFileSync(src, buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': 'x' }));
      const r = await writePaddedJar(src, join(dir, 'big.jar'), 3 * 1024 * 1024 + 17);
      expect(r.size).toBeGreaterThan(3 * 1024 * 1024);
      expect(await zipProblem(join(dir, 'big.jar'))).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
