import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yauzl from 'yauzl';
import { libName, nestArtifacts } from '../../../src/artifacts/nested-jar';
import { zipProblem } from '../../../src/artifacts/zip-verify';
import { buildJar } from '../../helpers/jars';

function entries(path: string): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.open(path, { lazyEntries: true }, (err, zip) => {
      if (err || !zip) return reject(err);
      const out = new Map<string, Buffer>();
      zip.on('entry', (e: yauzl.Entry) =>
        zip.openReadStream(e, (se, s) => {
          if (se || !s) return reject(se);
          const chunks: Buffer[] = [];
          s.on('data', (c: Buffer) => chunks.push(c));
          s.on('end', () => {
            out.set(e.fileName, Buffer.concat(chunks));
            zip.readEntry();
          });
        }),
      );
      zip.on('end', () => resolve(out));
      zip.readEntry();
    });
  });
}

describe('nesting artifacts under lib/ (user.artifacts.artifact-list)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-nest-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps every job-jar entry, adds the artifacts STORED, and stays a valid zip', async () => {
    const job = Buffer.concat([
      buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.Main\n', 'a/Main.class': randomBytes(3000) }),
    ]);
    const udf = buildJar({ 'b/Udf.class': randomBytes(2000) });
    writeFileSync(join(dir, 'job.jar'), job);
    writeFileSync(join(dir, 'udf.jar'), udf);
    const out = join(dir, 'out.jar');
    const r = await nestArtifacts(join(dir, 'job.jar'), [{ path: join(dir, 'udf.jar'), name: libName(0, '/x/udf.jar') }], out);
    expect(r.sha256).toBe(createHash('sha256').update(readFileSync(out)).digest('hex'));
    expect(await zipProblem(out)).toBeUndefined();
    const got = await entries(out);
    expect([...got.keys()]).toEqual(['META-INF/MANIFEST.MF', 'a/Main.class', 'lib/00-udf.jar']);
    expect(got.get('lib/00-udf.jar')!.equals(udf)).toBe(true);
  });

  it('makes lib/ names safe and unique', () => {
    expect(libName(3, '/a/b/../x y.jar')).toBe('03-x_y.jar');
    expect(libName(0, '/..')).toBe('00-artifact.jar');
    expect(libName(1, '/a/udf')).toBe('01-udf.jar');
  });
});
