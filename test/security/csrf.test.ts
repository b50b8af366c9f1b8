// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import request from 'supertest';
import { composeGateway, type ComposedGateway } from '../helpers/gateway';
import { startOrigin, type Origin } from '../helpers/origin';

/**
 * A class of hole (ADR 0009): a page on another site must not make a user's browser
 * start, cancel or change a job through the gateway (docs/web-ui.md's browser set-ups trust the
 * browser: a proxy adding credentials, a client certificate). Non-browser clients (Flink's, curl,
 * the operator) send neither Sec-Fetch-Site nor Origin and are unaffected; so are reads.
 */

const JOB = '0123456789abcdef0123456789abcdef';

describe('cross-site state changes are refused; everything else is not', () => {
  let jm: Origin;
  let gw: ComposedGateway;
  const reached: string[] = [];

  beforeAll(async () => {
    jm = await startOrigin((req, res) => {
      // The job watcher's own periodic read is the gateway's, not a caller's request passed on.
      if (!(req.method === 'GET' && req.url === '/v1/jobs/overview')) reached.push(`${req.method} ${req.url}`);
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"jobid":"x"}');
    });
    gw = await composeGateway(jm.url, {});
  });
  afterAll(async () => {
    await gw.close();
    await jm.close();
  });

  // In-process (supertest): the decision is the route's, nothing here depends on the socket. The
  // gateway's own origin is whatever Host the browser sent, so the test names one.
  const HOST = 'gateway.test:8081';
  const send = async (method: string, path: string, headers: Record<string, string>, body?: string) => {
    const call = request(gw.app)
      [method.toLowerCase() as 'get' | 'post' | 'patch' | 'delete'](path)
      .set({ host: HOST, ...headers });
    const r = await (body !== undefined ? call.send(body) : call);
    return { status: r.status, text: r.text };
  };
  const own = () => HOST;

  const stateChanging: [string, string, string | undefined, Record<string, string>][] = [
    ['POST', '/jars/x.jar/run', '{}', { 'content-type': 'text/plain' }],
    ['POST', '/v1/jars/x.jar/plan', '{}', { 'content-type': 'text/plain' }],
    ['POST', '/v1/jars/upload', 'x', { 'content-type': 'multipart/form-data; boundary=b' }],
    ['DELETE', '/v1/jars/x.jar', undefined, {}],
    ['GET', `/jobs/${JOB}/yarn-cancel`, undefined, {}],
    ['GET', `/jobs/${JOB}/yarn-stop`, undefined, {}],
    ['PATCH', `/v1/jobs/${JOB}?mode=cancel`, undefined, {}],
    ['POST', `/v1/jobs/${JOB}/stop`, '{}', { 'content-type': 'text/plain' }],
    ['POST', '/v1/jobs', 'x', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['DELETE', '/v1/cluster', undefined, {}],
  ];
  const browserMarks: Record<string, string>[] = [
    { 'sec-fetch-site': 'cross-site' },
    { 'sec-fetch-site': 'same-site' },
    { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
    { origin: 'https://evil.example' },
    { origin: 'null' },
  ];

  it.each(stateChanging)(
    'refuses a cross-site %s %s in every browser marking, before the JobManager',
    async (method, path, body, headers) => {
      const before = reached.length;
      for (const marks of browserMarks) {
        const r = await send(method, path, { ...headers, ...marks }, body);
        expect({ marks, status: r.status, code: r.text.match(/GW_[A-Z_]+/)?.[0] }).toEqual({
          marks,
          status: 403,
          code: 'GW_AUTH_CROSS_SITE',
        });
      }
      expect(reached.slice(before)).toEqual([]);
    },
  );

  it("lets the same origin (the Web UI), a user's own navigation and non-browser clients through", async () => {
    const allowed: Record<string, string>[] = [
      { 'sec-fetch-site': 'same-origin', origin: `http://${own()}` },
      { 'sec-fetch-site': 'none' },
      { origin: `https://${own()}` },
      {},
    ];
    for (const marks of allowed) {
      const r = await send('POST', `/v1/jobs/${JOB}/stop`, { 'content-type': 'application/x-www-form-urlencoded', ...marks }, '{}');
      expect({ marks, status: r.status }).toEqual({ marks, status: 200 });
    }
  });

  it('never refuses a read, whatever the site', async () => {
    for (const marks of browserMarks) expect((await send('GET', '/v1/jobs/overview', marks)).status).toBe(200);
  });
});
