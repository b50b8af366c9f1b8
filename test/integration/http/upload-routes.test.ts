import { createHash } from 'node:crypto';
import request from 'supertest';
import { composeGateway, type ComposedGateway } from '../../helpers/gateway';
import { buildJar } from '../../helpers/jars';
import { startFakeJobManager, type FakeJobManager } from '../../servers/fake-jobmanager';

const JAR = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': 'x' });

function expectCode(r: request.Response, status: number, code: string, text?: RegExp): void {
  expect(r.status).toBe(status);
  expect(Object.keys(r.body as object)).toEqual(['errors']);
  const [message] = (r.body as { errors: string[] }).errors;
  expect(message).toMatch(new RegExp(`^${code}: `));
  if (text) expect(message).toMatch(text);
}

/**
 * POST /jars/upload's rules, multipart built by supertest and parsed by multer, in-process, in
 * front of a fake JobManager that keeps whatever upload it completes: each refusal leaves nothing
 * there. (The bounds that need a socket — an oversized body cut off — are in upload-bounds.test.ts;
 * the same refusals against the real Flink are in test/e2e/bad-input.test.ts.)
 */
describe('POST /jars/upload (supertest, multer, fake JobManager)', () => {
  let jm: FakeJobManager;
  let gw: ComposedGateway;
  let kept: number;

  beforeAll(async () => {
    jm = await startFakeJobManager();
    gw = await composeGateway(jm.url, {});
  });
  beforeEach(() => {
    kept = jm.jars.size;
  });
  afterAll(async () => {
    await gw?.close();
    await jm?.stop();
  });

  const upload = () => request(gw.app).post('/jars/upload');

  it('accepts one jar under any field name with an empty request attribute, and hands over its exact bytes', async () => {
    const r = await upload().field('request', '{}').attach('file_0', JAR, 'placeholder.jar');
    expect(r.status).toBe(200);
    const id = String(r.body.filename).split('/').pop()!;
    expect(id).toMatch(/_placeholder\.jar$/);
    expect(jm.jars.get(id)).toMatchObject({ size: JAR.length, sha256: createHash('sha256').update(JAR).digest('hex') });
  });

  it('keeps only the last path segment of the file name, as Flink does', async () => {
    const r = await upload().attach('jarfile', JAR, 'C:\\builds\\app.jar');
    expect(r.status).toBe(200);
    expect(String(r.body.filename)).toMatch(/_app\.jar$/);
  });

  it('two files, no file, a non-.jar name, an unknown attribute, a bad request attribute and a non-multipart body are refused; nothing is kept', async () => {
    expectCode(await upload().attach('a', JAR, 'a.jar').attach('b', JAR, 'b.jar'), 400, 'GW_UPLOAD_FILE_COUNT', /received 2 or more/);
    expectCode(await upload().field('request', '{}'), 400, 'GW_UPLOAD_FILE_COUNT', /received 0/);
    expectCode(await upload().attach('jarfile', JAR, 'app.zip'), 400, 'GW_UPLOAD_NOT_JAR_NAME', /'app\.zip'/);
    // Before the file and after it.
    expectCode(await upload().field('program', 'x').attach('jarfile', JAR, 'a.jar'), 400, 'GW_UPLOAD_UNKNOWN_ATTRIBUTE', /program/);
    expectCode(await upload().attach('jarfile', JAR, 'a.jar').field('program', 'x'), 400, 'GW_UPLOAD_UNKNOWN_ATTRIBUTE', /program/);
    for (const value of ['notjson', '[]', 'null']) {
      expectCode(
        await upload().attach('jarfile', JAR, 'a.jar').field('request', value),
        400,
        'GW_REQUEST_MALFORMED',
        /'request' attribute/,
      );
    }
    expectCode(await upload().send({ jar: 'x' }), 400, 'GW_UPLOAD_NOT_MULTIPART');
    expectCode(await upload().set('content-type', 'multipart/form-data').send('x'), 400, 'GW_UPLOAD_NOT_MULTIPART');
    expect(jm.jars.size).toBe(kept);
  });

  it('random bytes named .jar and a truncated zip are refused before the JobManager sees a whole file', async () => {
    expectCode(await upload().attach('jarfile', Buffer.alloc(5000, 7), 'random.jar'), 400, 'GW_UPLOAD_NOT_ZIP', /local file header/);
    expectCode(
      await upload().attach('jarfile', JAR.subarray(0, JAR.length - 30), 'cut.jar'),
      400,
      'GW_UPLOAD_NOT_ZIP',
      /end-of-central-directory/,
    );
    expect(jm.jars.size).toBe(kept);
  });

  it('a JobManager that refuses the upload → its error in the envelope, nothing kept', async () => {
    jm.rejectUploads = { status: 500, message: 'disk full on the JobManager' };
    try {
      const r = await upload().attach('jarfile', JAR, 'a.jar');
      expectCode(r, 502, 'GW_CLUSTER_ERROR', /disk full on the JobManager/);
    } finally {
      delete jm.rejectUploads;
    }
    expect(jm.jars.size).toBe(kept);
  });
});
