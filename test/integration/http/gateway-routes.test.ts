import request from 'supertest';
import { composeGateway, type ComposedGateway } from '../../helpers/gateway';
import { startFakeJobManager, type FakeJobManager } from '../../servers/fake-jobmanager';

/** Flink's error envelope with a gateway code at the start of its one message. */
function expectEnvelope(r: request.Response, status: number, code: string): void {
  expect(r.status).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(Object.keys(r.body as object)).toEqual(['errors']);
  expect((r.body as { errors: string[] }).errors).toHaveLength(1);
  expect((r.body as { errors: string[] }).errors[0]).toMatch(new RegExp(`^${code}: `));
}

/**
 * The gateway's own routes and its error envelope, in-process with supertest (nothing here
 * depends on the socket), in front of a fake JobManager.
 */
describe('gateway routes and the error envelope (supertest, in-process)', () => {
  let jm: FakeJobManager;
  let gw: ComposedGateway;
  let down: ComposedGateway;

  beforeAll(async () => {
    jm = await startFakeJobManager();
    gw = await composeGateway(jm.url, {});
    // Nothing listens on port 9 (discard): the JobManager is unreachable.
    down = await composeGateway('http://127.0.0.1:9', {});
  });
  afterAll(async () => {
    await gw?.close();
    await down?.close();
    await jm?.stop();
  });

  it('health is UP; readiness follows the JobManager', async () => {
    const health = await request(gw.app).get('/gateway/v1/health');
    expect([health.status, health.body]).toEqual([200, { status: 'UP' }]);
    const ready = await request(gw.app).get('/gateway/v1/ready');
    expect([ready.status, ready.body]).toEqual([200, { ready: true }]);
    const notReady = await request(down.app).get('/gateway/v1/ready');
    expect([notReady.status, notReady.body]).toEqual([503, { ready: false, reason: 'JobManager unreachable' }]);
    // Health does not depend on the JobManager: a liveness probe must not restart a healthy gateway.
    expect((await request(down.app).get('/gateway/v1/health')).status).toBe(200);
  });

  it('fetch progress lists nothing yet and an unknown fetch is 404 in the envelope', async () => {
    const list = await request(gw.app).get('/gateway/v1/fetches');
    expect([list.status, list.body]).toEqual([200, { fetches: [] }]);
    expectEnvelope(await request(gw.app).get('/gateway/v1/fetches/no-such-fetch'), 404, 'GW_ROUTE_NOT_FOUND');
  });

  it('token status names no provider (none loaded) and says what tokens isolate', async () => {
    const r = await request(gw.app).get('/gateway/v1/tokens');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ providers: [], registeredJobs: [], restorePending: [], isolation: { jobCode: 'shared' } });
  });

  it('metrics are Prometheus text', async () => {
    const r = await request(gw.app).get('/gateway/v1/metrics');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/plain/);
    expect(r.text).toMatch(/^# HELP /m);
  });

  it("unknown jar routes, bad jar ids and non-canonical paths are refused in Flink's envelope", async () => {
    // A code-running route by name with another method is the gateway's 404 (routes it does not know pass through).
    expectEnvelope(await request(gw.app).get('/jars/x.jar/run'), 404, 'GW_ROUTE_NOT_FOUND');
    expectEnvelope(await request(gw.app).post('/jars/%2e%2e/run').send({}), 400, 'GW_JAR_ID_INVALID');
    expectEnvelope(await request(gw.app).post('/v1/jars/a%252Fb/run').send({}), 400, 'GW_ROUTE_NONCANONICAL');
    expectEnvelope(await request(gw.app).post('/v1/jars/x.jar/run%3F').send({}), 400, 'GW_ROUTE_AMBIGUOUS');
    // Before Flink 2.3 (the fake JobManager reports no newer version) the route does not exist, as on Flink.
    expectEnvelope(await request(gw.app).post('/v1/jars/x.jar/run-application').send({}), 404, 'GW_ROUTE_NOT_FOUND');
  });

  it('run bodies are parsed as Flink parses them: malformed JSON and wrong types → 400 naming the problem', async () => {
    const run = () => request(gw.app).post('/jars/x.jar/run').set('content-type', 'application/json');
    const malformed = await run().send('{"jobId": ');
    expectEnvelope(malformed, 400, 'GW_REQUEST_MALFORMED');
    expect(malformed.body.errors[0]).toMatch(/JarRunRequestBody.*not valid JSON/);
    expect((await run().send('[1,2]')).body.errors[0]).toMatch(/^GW_REQUEST_MALFORMED: .*JSON object/);
    expect((await run().send({ jobId: 'not-hex' })).body.errors[0]).toMatch(/^GW_REQUEST_MALFORMED: .*jobId must be 32 hexadecimal/);
    expect((await run().send({ parallelism: 'four' })).body.errors[0]).toMatch(/^GW_REQUEST_MALFORMED: .*parallelism/);
    // None of them reached the JobManager.
    expect(jm.runs).toEqual([]);
  });
});
