import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { composeGateway, type ComposedGateway } from '../../helpers/gateway';
import { buildJar } from '../../helpers/jars';
import { startFakeJobManager, type FakeJobManager } from '../../servers/fake-jobmanager';

const JAR = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': 'x' });
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function expectCode(r: request.Response, status: number, code: string, text?: RegExp): void {
  expect(r.status).toBe(status);
  const [message] = (r.body as { errors: string[] }).errors;
  expect(message).toMatch(new RegExp(`^${code}: `));
  if (text) expect(message).toMatch(text);
}

/**
 * POST /jars/upload with the shared-dir hand-off (ADR 0019): the checked spool file is hard-linked
 * into <web.upload.dir>/flink-web-upload, the JobManager's upload route is never called, and a
 * refused upload leaves nothing in the jar directory nor in the gateway's spool. (The same against
 * the real Flink: test/e2e/upload-shared-dir.test.ts.)
 */
describe('POST /jars/upload linked into a shared jar directory (fake JobManager)', () => {
  let jm: FakeJobManager;
  let gw: ComposedGateway;
  let uploadDir: string;
  let cacheDir: string;
  const jarDir = () => join(uploadDir, 'flink-web-upload');
  const jarFiles = () => {
    try {
      return readdirSync(jarDir());
    } catch {
      return [];
    }
  };
  const spooled = () => readdirSync(join(cacheDir, 'tmp'));

  beforeAll(async () => {
    jm = await startFakeJobManager();
    uploadDir = mkdtempSync(join(tmpdir(), 'gw-shared-upload-'));
    cacheDir = mkdtempSync(join(tmpdir(), 'gw-shared-cache-'));
    gw = await composeGateway(jm.url, {
      'web.upload.dir': uploadDir,
      'gateway.artifacts.handoff': 'shared-dir',
      'gateway.artifacts.cache-dir': cacheDir,
    });
  });
  afterEach(() => {
    jm.webSubmitDisabled = false;
  });
  afterAll(async () => {
    await gw?.close();
    await jm?.stop();
    rmSync(uploadDir, { recursive: true, force: true });
    rmSync(cacheDir, { recursive: true, force: true });
  });

  const upload = () => request(gw.app).post('/v1/jars/upload');

  it("answers as Flink's upload does, with the jar's exact bytes in the JobManager's jar directory and nothing sent to its upload route", async () => {
    const r = await upload().field('request', '{}').attach('jarfile', JAR, 'app.jar');
    expect(r.status).toBe(200);
    expect(Object.keys(r.body as object)).toEqual(['filename', 'status']);
    expect(r.body.status).toBe('success');
    const id = String(r.body.filename).split('/').pop()!;
    expect(id).toMatch(/^[0-9a-f-]{36}_app\.jar$/);
    expect(r.body.filename).toBe(join(jarDir(), id));
    expect(sha(readFileSync(join(jarDir(), id)))).toBe(sha(JAR));
    // Private to the gateway's user, like every jar it hands off.
    expect(statSync(join(jarDir(), id)).mode & 0o077).toBe(0);
    expect(jm.requests.filter((l) => l.includes('/jars/upload'))).toEqual([]);
    expect(spooled()).toEqual([]);
    expect(gw.logs.find((l) => l.msg === 'jar uploaded')).toMatchObject({ handoff: 'shared-dir', sha256: sha(JAR), size: JAR.length });
  });

  it('refused uploads leave nothing in the jar directory and nothing spooled', async () => {
    const before = jarFiles();
    expectCode(await upload().attach('jarfile', Buffer.alloc(5000, 7), 'random.jar'), 400, 'GW_UPLOAD_NOT_ZIP', /local file header/);
    expectCode(
      await upload().attach('jarfile', JAR.subarray(0, JAR.length - 30), 'cut.jar'),
      400,
      'GW_UPLOAD_NOT_ZIP',
      /end-of-central-directory/,
    );
    expectCode(await upload().attach('a', JAR, 'a.jar').attach('b', JAR, 'b.jar'), 400, 'GW_UPLOAD_FILE_COUNT');
    expectCode(await upload().attach('jarfile', JAR, 'a.jar').field('program', 'x'), 400, 'GW_UPLOAD_UNKNOWN_ATTRIBUTE', /program/);
    expectCode(await upload().attach('jarfile', JAR, 'app.zip'), 400, 'GW_UPLOAD_NOT_JAR_NAME');
    expect(jarFiles()).toEqual(before);
    expect(spooled()).toEqual([]);
  });

  it('a JobManager with web.submit.enable: false gets no linked jar: 404 GW_CLUSTER_SUBMIT_DISABLED, as its own upload would be refused', async () => {
    jm.webSubmitDisabled = true;
    const before = jarFiles();
    expectCode(await upload().attach('jarfile', JAR, 'app.jar'), 404, 'GW_CLUSTER_SUBMIT_DISABLED', /web\.submit\.enable: false/);
    expect(jarFiles()).toEqual(before);
    expect(spooled()).toEqual([]);
  });
});
