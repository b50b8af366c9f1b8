import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { filesUnder, json, newJobId, uploadBytes, uploadFile, WORDCOUNT_JAR } from '../helpers/flink';
import { buildJar } from '../helpers/jars';

const uploadDir = () => process.env.E2E_FLINK_UPLOAD_DIR ?? '';

function expectEnvelope(r: { status: number; body: Record<string, unknown> }, status: number, code: string, text?: RegExp) {
  expect(r.status).toBe(status);
  expect(Object.keys(r.body)).toEqual(['errors']);
  const msg = (r.body.errors as string[])[0]!;
  expect(msg.startsWith(`${code}: `)).toBe(true);
  if (text) expect(msg).toMatch(text);
}

describe("bad input gets a 4xx in Flink's envelope and leaves nothing behind", () => {
  let gw: TestGateway;
  let small: TestGateway;
  let jarId: string;

  beforeAll(async () => {
    gw = await startGateway(flinkUrl());
    small = await startGateway(flinkUrl(), { 'gateway.upload.max-size': '4 kb' });
    const up = await uploadFile(gw.url, WORDCOUNT_JAR, 'WordCount.jar');
    jarId = String(up.body.filename).split('/').pop()!;
  });
  afterAll(async () => {
    await json('DELETE', `${gw.url}/jars/${jarId}`);
    await gw.close();
    await small.close();
  });

  afterEach(async () => {
    // Whatever the test did, the gateway keeps serving.
    expect((await json('GET', `${gw.url}/gateway/v1/health`)).status).toBe(200);
  });

  it("run of an unknown jar id → 400 with Flink's message", async () => {
    expectEnvelope(await json('POST', `${gw.url}/v1/jars/0000_missing.jar/run`, {}), 400, 'GW_JAR_NOT_FOUND', /does not exist/);
    expectEnvelope(await json('POST', `${gw.url}/jars/0000_missing.jar/plan`, {}), 400, 'GW_JAR_NOT_FOUND');
  });

  it('a file of random bytes named x.jar is refused and never lands on the JobManager', async () => {
    const name = `random-${newJobId()}.jar`;
    expectEnvelope(await uploadBytes(gw.url, [{ name, bytes: randomBytes(200_000) }]), 400, 'GW_UPLOAD_NOT_ZIP', /local file header/);
    await new Promise((r) => setTimeout(r, 300));
    expect(filesUnder(uploadDir()).filter((f) => f.includes(name))).toEqual([]);
    const list = await json('GET', `${gw.url}/jars`);
    expect((list.body.files as { name: string }[]).map((f) => f.name)).not.toContain(name);
  });

  it('a truncated zip is refused', async () => {
    const whole = readFileSync(WORDCOUNT_JAR);
    const name = `truncated-${newJobId()}.jar`;
    expectEnvelope(
      await uploadBytes(gw.url, [{ name, bytes: whole.subarray(0, Math.floor(whole.length / 2)) }]),
      400,
      'GW_UPLOAD_NOT_ZIP',
      /end-of-central-directory/,
    );
    expect(filesUnder(uploadDir()).filter((f) => f.includes(name))).toEqual([]);
  });

  it('two files, no file, a non-.jar name, an unknown attribute and a non-multipart body are refused', async () => {
    const jar = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
    expectEnvelope(
      await uploadBytes(gw.url, [
        { name: 'a.jar', bytes: jar },
        { name: 'b.jar', bytes: jar },
      ]),
      400,
      'GW_UPLOAD_FILE_COUNT',
    );
    expectEnvelope(await uploadBytes(gw.url, [], { request: '{}' }), 400, 'GW_UPLOAD_FILE_COUNT', /received 0/);
    expectEnvelope(
      await uploadBytes(gw.url, [{ name: 'app.zip', bytes: jar }]),
      400,
      'GW_UPLOAD_NOT_JAR_NAME',
      /Only Jar files are allowed/,
    );
    expectEnvelope(
      await uploadBytes(gw.url, [{ name: 'a.jar', bytes: jar }], { program: 'x' }),
      400,
      'GW_UPLOAD_UNKNOWN_ATTRIBUTE',
      /program/,
    );
    expectEnvelope(await json('POST', `${gw.url}/jars/upload`, { jar: 'x' }), 400, 'GW_UPLOAD_NOT_MULTIPART');
  });

  it("accepts the operator's field name file_0 and the request attribute", async () => {
    const r = await uploadBytes(
      gw.url,
      [{ name: 'placeholder.jar', bytes: buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' }), field: 'file_0' }],
      { request: '{}' },
    );
    expect(r.status).toBe(200);
    await json('DELETE', `${gw.url}/jars/${String(r.body.filename).split('/').pop()}`);
  });

  it("parses the upload's request attribute as Flink does: empty or a JSON object; anything else is 400 (fidelity item 5)", async () => {
    const jar = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
    // What the embedded Flink 2.1 answers for each value (checked by hand against its /jars/upload):
    // '' {} {"a":1} → 200; notjson [] "x" 5 {"a": → 400 "did not match expected format"; null → 500 (here 400).
    for (const request of ['', '{"a":1}']) {
      const r = await uploadBytes(gw.url, [{ name: 'ok.jar', bytes: jar }], { request });
      expect({ request, status: r.status }).toEqual({ request, status: 200 });
      await json('DELETE', `${gw.url}/jars/${String(r.body.filename).split('/').pop()}`);
    }
    for (const request of ['notjson', '[]', '"x"', '5', '{"a":', 'null']) {
      const r = await uploadBytes(gw.url, [{ name: 'bad.jar', bytes: jar }], { request });
      expect({ request, status: r.status, code: String((r.body.errors as string[])[0]).split(':')[0] }).toEqual({
        request,
        status: 400,
        code: 'GW_REQUEST_MALFORMED',
      });
    }
    expect(filesUnder(uploadDir()).filter((f) => f.endsWith('_bad.jar'))).toEqual([]);
  });

  it('a GET plan with a body is parsed as Flink parses it (fidelity item 3)', async () => {
    const ok = await json('GET', `${gw.url}/v1/jars/${jarId}/plan`, { parallelism: '', programArgsList: ['--parallelism', '1'] });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ plan: { name: 'WordCount' } });
    expectEnvelope(
      await json('GET', `${gw.url}/v1/jars/${jarId}/plan`, { parallelism: '4.5' }),
      400,
      'GW_REQUEST_MALFORMED',
      /parallelism/,
    );
  });

  it('an upload over gateway.upload.max-size → 413, nothing kept', async () => {
    const name = `big-${newJobId()}.jar`;
    expectEnvelope(
      await uploadBytes(small.url, [{ name, bytes: readFileSync(WORDCOUNT_JAR) }]),
      413,
      'GW_UPLOAD_TOO_LARGE',
      /gateway\.upload\.max-size/,
    );
    expect(filesUnder(uploadDir()).filter((f) => f.includes(name))).toEqual([]);
  });

  it('malformed JSON, wrong types and a bad jobId → 400 naming the problem', async () => {
    expectEnvelope(
      await json('POST', `${gw.url}/jars/${jarId}/run`, '{"jobId": '),
      400,
      'GW_REQUEST_MALFORMED',
      /JarRunRequestBody.*not valid JSON/,
    );
    expectEnvelope(await json('POST', `${gw.url}/jars/${jarId}/run`, '[1,2]'), 400, 'GW_REQUEST_MALFORMED', /JSON object/);
    expectEnvelope(
      await json('POST', `${gw.url}/jars/${jarId}/run`, { jobId: 'not-hex' }),
      400,
      'GW_REQUEST_MALFORMED',
      /jobId must be 32 hexadecimal/,
    );
    expectEnvelope(await json('POST', `${gw.url}/jars/${jarId}/run`, { parallelism: 'four' }), 400, 'GW_REQUEST_MALFORMED', /parallelism/);
    expectEnvelope(
      await json('POST', `${gw.url}/jars/${jarId}/run`, { programArgsList: 'a b' }),
      400,
      'GW_REQUEST_MALFORMED',
      /programArgsList/,
    );
    expectEnvelope(
      await json('POST', `${gw.url}/jars/${jarId}/plan`, { flinkConfiguration: { a: { b: 1 } } }),
      400,
      'GW_REQUEST_MALFORMED',
      /JarPlanRequestBody/,
    );
  });

  it('a jar whose manifest names no entry class → 400 (Flink answers 500)', async () => {
    const r = await uploadBytes(gw.url, [{ name: 'no-main.jar', bytes: buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' }) }]);
    const id = String(r.body.filename).split('/').pop()!;
    const run = await json('POST', `${gw.url}/jars/${id}/run`, {});
    expectEnvelope(run, 400, 'GW_JAR_INVALID');
    await json('DELETE', `${gw.url}/jars/${id}`);
  });

  it('traversal and encoded variants in :jarid and in the route are refused, never passed through', async () => {
    expectEnvelope(await json('POST', `${gw.url}/jars/%2e%2e/run`, {}), 400, 'GW_JAR_ID_INVALID');
    expectEnvelope(await json('DELETE', `${gw.url}/jars/..%5C..%5Cetc`), 400, 'GW_JAR_ID_INVALID');
    expectEnvelope(await json('DELETE', `${gw.url}/v1/jars/..%2F..%2Fetc%2Fpasswd`), 404, 'GW_ROUTE_NOT_FOUND');
    expectEnvelope(await json('POST', `${gw.url}/v1/jars/a%252Fb/run`, {}), 400, 'GW_ROUTE_NONCANONICAL');
    expectEnvelope(await json('POST', `${gw.url}/v1/jars/${jarId}/run%3F`, {}), 400, 'GW_ROUTE_AMBIGUOUS');
    expectEnvelope(await json('POST', `${gw.url}/v1/jars/${jarId}%23/run`, {}), 400, 'GW_ROUTE_AMBIGUOUS');
    expectEnvelope(await json('GET', `${gw.url}/jars/${jarId}/run`), 404, 'GW_ROUTE_NOT_FOUND', /Not found: /);
    // A /jars route the gateway does not know (one a later Flink may add) is Flink's to answer (a GET falls to its static-file handler).
    const unknown = await json('GET', `${gw.url}/jars/${jarId}/nothing-here`);
    expect({ status: unknown.status, errors: unknown.body.errors }).toEqual({
      status: 404,
      errors: [expect.stringMatching(/^(?:Not found: |Unable to load requested file )\/jars\//)],
    });
    // A once-encoded route is what Flink itself would route, so the gateway handles it as a run.
    const jobId = newJobId();
    expect(await json('POST', `${gw.url}/v1/jars/${jarId}/%72un`, { jobId })).toMatchObject({ status: 200, body: { jobid: jobId } });
    // Flink's Router decodes every segment once more, so a twice-encoded route is a run for Flink too.
    const twice = newJobId();
    expect(await json('POST', `${gw.url}/v1/jars/${jarId}/%2572un`, { jobId: twice })).toMatchObject({
      status: 200,
      body: { jobid: twice },
    });
  });

  it('Flink 2.3 run-application answers 404 Not found in front of a 2.1 JobManager, as Flink 2.1 does (test/distribution/ runs it on 2.3)', async () => {
    expectEnvelope(await json('POST', `${gw.url}/v1/jars/${jarId}/run-application`, {}), 404, 'GW_ROUTE_NOT_FOUND', /run-application/);
  });

  it('user.artifacts.job-jar with web.submit.jar-uri.enable off → 400, the placeholder is never run', async () => {
    const jobId = newJobId();
    const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      flinkConfiguration: { 'user.artifacts.job-jar': 's3://bucket/app.jar', 'web.submit.jar-uri.enable': 'true' },
    });
    expectEnvelope(r, 400, 'GW_JAR_URI_DISABLED', /web\.submit\.jar-uri\.enable: true/);
    expect((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).status).toBe(404);
  });

  it('never logs flinkConfiguration values', async () => {
    await json('POST', `${gw.url}/v1/jars/0000_missing.jar/run`, { flinkConfiguration: { 's3.secret-key': 'sekrit-value-123' } });
    expect(JSON.stringify(gw.logs)).not.toContain('sekrit-value-123');
  });
});

describe('raw HTTP details', () => {
  it("error responses carry Flink's content type", async () => {
    const gw = await startGateway(flinkUrl());
    try {
      const res = await request(`${gw.url}/jars/x/y/z`);
      expect(res.headers['content-type']).toBe('application/json; charset=UTF-8');
      expect(res.statusCode).toBe(404);
      await res.body.dump();
    } finally {
      await gw.close();
    }
  });
});
