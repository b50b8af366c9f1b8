// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { Agent, request } from 'undici';
import { builtinPlugins } from '../../fs-plugins';
import { startGateway, type TestGateway, writeTokensFile } from '../helpers/gateway';
import { startOrigin, type Origin } from '../helpers/origin';
import { issueCert, makeTestCa } from '../servers/tls';

const hex = (n: number) => randomBytes(n).toString('hex');
const CANARY = { sas: `canary-sas-${hex(8)}`, s3: `canary-s3-${hex(8)}`, jvm: `canary-jvm-${hex(8)}`, user: `canary-user-${hex(8)}` };
const TOKENS = { viewer: `viewer-${hex(12)}`, ops: `ops-${hex(12)}` };
const JOB = '0123456789abcdef0123456789abcdef';

/** What Flink 1.20–2.3 answer on their configuration routes, with secrets the gateway knows as sensitive and Flink does not. */
function listing(): unknown {
  return [
    { key: 'fs.azure.sas.jars.team.blob.core.windows.net', value: CANARY.sas },
    { key: 's3.access-key', value: CANARY.s3 },
    { key: 's3.secret-key', value: '******' },
    { key: 'env.java.opts.jobmanager', value: `-Xmx1g -Dfs.s3a.bucket.b.access.key=${CANARY.jvm}` },
    { key: 'parallelism.default', value: '1' },
  ];
}

/**
 * A JobManager stand-in on a real node:http server: configuration routes answer a listing with
 * canaries (compressed as `?enc=` says, whatever the request asked for), log routes a log with
 * them, and every request's headers are kept.
 */
async function startJobManager(seen: { url: string; headers: IncomingHttpHeaders }[]): Promise<Origin> {
  return startOrigin((req, res) => {
    req.resume();
    seen.push({ url: req.url ?? '', headers: { ...req.headers } });
    const url = new URL(req.url ?? '/', 'http://x');
    // Routed as Flink's router routes: decoded once, split, each segment decoded again, empty ones dropped.
    const segments = decodeURIComponent(url.pathname)
      .split('/')
      .filter(Boolean)
      .map((t) => decodeURIComponent(t));
    const path = `/${(segments[0] === 'v1' ? segments.slice(1) : segments).join('/')}`;
    if (/\/(log|stdout)$|\/logs(\/|$)|thread-dump/.test(path)) {
      res
        .writeHead(200, { 'content-type': 'text/plain' })
        .end(`INFO Loading configuration property: fs.azure.sas.jars.team.blob.core.windows.net, ${CANARY.sas}\n`);
      return;
    }
    if (path === '/not-json/jobmanager/config') {
      res
        .writeHead(url.searchParams.get('status') === '404' ? 404 : 200, { 'content-type': 'text/html' })
        .end(`<html>${CANARY.sas}</html>`);
      return;
    }
    if (/\/(config|environment)$/.test(path) && path !== '/config') {
      const body =
        path.endsWith('/config') && path.startsWith('/jobs/') && !path.includes('jobmanager')
          ? { jid: JOB, name: 'job', 'execution-config': { 'user-config': { 'db.password': CANARY.user, region: 'eu' } } }
          : listing();
      let bytes = Buffer.from(JSON.stringify(body));
      const enc = url.searchParams.get('enc');
      if (enc === 'gzip') bytes = gzipSync(bytes);
      if (enc === 'br') bytes = brotliCompressSync(bytes);
      if (enc === 'deflate') bytes = deflateSync(bytes);
      if (enc === 'zstd') bytes = Buffer.from('not really zstd');
      res.writeHead(200, {
        'content-type': 'application/json; charset=UTF-8',
        'content-length': String(bytes.length),
        ...(enc ? { 'content-encoding': enc } : {}),
      });
      res.end(req.method === 'HEAD' ? undefined : bytes);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' }).end(JSON.stringify({ path }));
  });
}

const hasCanary = (text: string) => Object.values(CANARY).some((c) => text.includes(c));
/** Marks the test's own requests: the gateway's background calls (job lookups) reach the stand-in too. */
const UA = 'jobmanager-answers-test';

/**
 * Secret-bearing JobManager answers and what reaches the JobManager, on a stand-in JobManager (the
 * real cluster's answers: jobmanager-secrets.test.ts). Configuration listings come back with the
 * gateway's sensitive keys hidden, in every spelling and content coding; what cannot be filtered
 * needs gateway.auth.permission.logs; no caller credential reaches the JobManager.
 */
describe('JobManager answers and upstream headers (a stand-in JobManager)', () => {
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  let jm: Origin;
  let gw: TestGateway;
  let open: TestGateway;
  let dir: string;
  /** What reached the stand-in from the test's requests since `from`. */
  const mine = (from: number) => seen.slice(from).filter((s) => s.headers['user-agent'] === UA);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-answers-'));
    jm = await startJobManager(seen);
    const cluster = {
      'gateway.auth.tokens-file': writeTokensFile(join(dir, 'tokens'), TOKENS),
      'gateway.auth.permission.submit': 'token:ops',
      'gateway.auth.permission.cancel': 'token:ops',
      'gateway.auth.permission.logs': 'token:ops',
      's3.access-key': CANARY.s3,
      's3.secret-key': `canary-secret-${hex(8)}`,
      'fs.azure.sas.jars.team.blob.core.windows.net': CANARY.sas,
    };
    gw = await startGateway(jm.url, cluster, builtinPlugins);
    open = await startGateway(jm.url, {}, builtinPlugins);
  });

  afterAll(async () => {
    await gw?.close();
    await open?.close();
    await jm?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = async (base: string, path: string, token?: string, extra: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET') => {
    const res = await request(`${base}${path}`, {
      method,
      headers: { 'user-agent': UA, ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra },
    });
    return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
  };

  it.each([
    '/jobmanager/config',
    '/v1/jobmanager/config',
    '//v1//jobmanager/config/',
    '/v1/jobmanager/%63onfig',
    '/%76%31/jobmanager/%2563onfig',
    `/v1/jobs/${JOB}/jobmanager/config`,
    `/v1/applications/${JOB}/jobmanager/config`,
    `/v1/jobs/${JOB}/config`,
    '/v1/jobmanager/environment',
    '/v1/jobmanager/config?enc=gzip',
    '/v1/jobmanager/config?enc=br',
    '/v1/jobmanager/config?enc=deflate',
  ])('a read principal gets %s with every secret hidden, uncompressed', async (path) => {
    const before = seen.length;
    const r = await get(gw.url, path, TOKENS.viewer, { 'accept-encoding': 'gzip, br' });
    expect(r.status).toBe(200);
    expect(hasCanary(r.text)).toBe(false);
    expect(r.text).toContain('******');
    expect(r.headers['content-encoding']).toBeUndefined();
    expect(Number(r.headers['content-length'])).toBe(Buffer.byteLength(r.text));
    expect(JSON.parse(r.text)).toBeTruthy();
    // The gateway asked for an uncompressed answer.
    expect(mine(before).map((s) => s.headers['accept-encoding'])).toEqual(['identity']);
  });

  it('keeps the shape and the values that are not secret', async () => {
    const r = await get(gw.url, '/v1/jobmanager/config', TOKENS.viewer);
    expect(JSON.parse(r.text)).toEqual([
      { key: 'fs.azure.sas.jars.team.blob.core.windows.net', value: '******' },
      { key: 's3.access-key', value: '******' },
      { key: 's3.secret-key', value: '******' },
      { key: 'env.java.opts.jobmanager', value: '-Xmx1g -Dfs.s3a.bucket.b.access.key=******' },
      { key: 'parallelism.default', value: '1' },
    ]);
  });

  it('does not relay what it cannot filter: an unknown coding or a non-JSON success is 502; a non-JSON error passes', async () => {
    for (const path of ['/v1/jobmanager/config?enc=zstd', '/not-json/jobmanager/config']) {
      const r = await get(gw.url, path, TOKENS.viewer);
      expect(r.status).toBe(502);
      expect(JSON.parse(r.text).errors[0]).toMatch(/^GW_CLUSTER_BAD_RESPONSE: /);
      expect(hasCanary(r.text)).toBe(false);
    }
    // An error page is not a configuration listing (a proxy's 404): relayed as it is.
    expect((await get(gw.url, '/not-json/jobmanager/config?status=404', TOKENS.viewer)).status).toBe(404);
  });

  it('filters without authentication too (anonymous sees what a read principal sees)', async () => {
    const r = await get(open.url, '/jobmanager/config', undefined);
    expect(r.status).toBe(200);
    expect(hasCanary(r.text)).toBe(false);
  });

  it.each([
    '/jobmanager/log',
    '/v1/jobmanager/logs',
    '/v1/jobmanager/logs/flink.log',
    '/jobmanager/stdout',
    '/v1/jobmanager/thread-dump',
    '/v1/jobmanager/%6Cog',
    '/v1/taskmanagers/tm-1/log',
    '/taskmanagers/tm-1/stdout',
    '/v1/taskmanagers/tm-1/logs/taskmanager.out',
    '/v1/taskmanagers/tm-1/thread-dump',
    '/v1/taskmanagers/tm-1/profiler',
    `/v1/jobs/${JOB}/vertices/${JOB}/flamegraph`,
  ])('%s needs gateway.auth.permission.logs: 403 for a read principal, 200 for a listed one, open without authentication', async (path) => {
    const before = seen.length;
    const denied = await get(gw.url, path, TOKENS.viewer);
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.text).errors[0]).toMatch(
      /^GW_AUTH_FORBIDDEN: token:viewer may not logs on this gateway .*gateway\.auth\.permission\.logs/,
    );
    expect(mine(before)).toEqual([]);
    expect((await get(gw.url, path, TOKENS.ops)).status).toBe(200);
    expect((await get(open.url, path)).status).toBe(200);
  });

  it('starting a profiler needs logs on top of cancel', async () => {
    const r = await request(`${gw.url}/v1/jobmanager/profiler`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.viewer}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(r.statusCode).toBe(403);
    await r.body.dump();
  });

  it("sends none of the caller's credentials upstream: an allow-list of what Flink reads", async () => {
    const credentials = {
      authorization: `Bearer ${TOKENS.ops}`,
      cookie: `session=cookie-${hex(8)}`,
      'proxy-authorization': `Basic proxy-${hex(8)}`,
      'x-forwarded-client-cert': `Hash=xfcc-${hex(8)};Subject="CN=ops"`,
      'x-ssl-client-cert': `-----BEGIN CERTIFICATE-----sslcert-${hex(8)}`,
      'x-ssl-client-s-dn': `CN=dn-${hex(8)}`,
      'x-client-cert': `xcc-${hex(8)}`,
      'ssl-client-cert': `scc-${hex(8)}`,
      'x-api-key': `apikey-${hex(8)}`,
      'x-amz-security-token': `amz-${hex(8)}`,
    };
    const before = seen.length;
    for (const [method, path] of [
      ['GET', '/v1/jobs/overview'],
      ['GET', '/v1/jobmanager/config'],
      ['GET', '/v1/jobmanager/log'],
      ['PATCH', `/v1/jobs/${JOB}?mode=cancel`],
      ['POST', `/v1/jobs/${JOB}/savepoints`],
      ['DELETE', '/v1/cluster'],
      ['GET', '/index.html'],
    ]) {
      const r = await request(`${gw.url}${path}`, {
        method: method as 'GET',
        headers: {
          ...credentials,
          'content-type': 'application/json',
          'user-agent': UA,
          'if-modified-since': 'Thu, 01 Jan 2026 00:00:00 GMT',
        },
        ...(method === 'GET' ? {} : { body: '{}' }),
      });
      expect(r.statusCode).toBe(200);
      await r.body.dump();
    }
    const upstream = mine(before);
    expect(upstream).toHaveLength(7);
    const secrets = Object.values(credentials).map((v) => v.split(/[ =]/).pop()!);
    for (const { url, headers } of upstream) {
      const names = Object.keys(headers).sort();
      expect({ url, names }).toEqual({ url, names: expect.not.arrayContaining(Object.keys(credentials)) });
      for (const name of names)
        expect([
          'accept',
          'accept-encoding',
          'accept-language',
          'cache-control',
          'connection',
          'content-length',
          'content-type',
          'host',
          'if-modified-since',
          'pragma',
          'transfer-encoding',
          'user-agent',
          'x-forwarded-for',
          'x-forwarded-host',
          'x-forwarded-proto',
        ]).toContain(name);
      const all = JSON.stringify(headers);
      for (const s of secrets) expect(all).not.toContain(s);
      expect(headers['user-agent']).toBe(UA);
    }
  });

  it("a client certificate's identity reaches the JobManager in no header either", async () => {
    const tlsDir = mkdtempSync(join(tmpdir(), 'gw-answers-tls-'));
    const ca = makeTestCa(tlsDir, 'gw');
    const server = issueCert(tlsDir, ca, 'server', { cn: 'localhost', use: 'server' });
    const client = issueCert(tlsDir, ca, 'client', { cn: 'flink-operator', use: 'client' });
    const mtls = await startGateway(jm.url, {
      'gateway.tls.cert': server.cert,
      'gateway.tls.key': server.key,
      'gateway.tls.client-ca': ca.cert,
    });
    const agent = new Agent({ connect: { ca: readFileSync(ca.cert), cert: readFileSync(client.cert), key: readFileSync(client.key) } });
    try {
      const before = seen.length;
      const r = await request(`${mtls.url}/v1/jobs/overview`, { dispatcher: agent, headers: { 'user-agent': UA } });
      expect(r.statusCode).toBe(200);
      await r.body.dump();
      const upstream = mine(before);
      expect(upstream).toHaveLength(1);
      expect(JSON.stringify(upstream[0]!.headers)).not.toMatch(/flink-operator|BEGIN CERTIFICATE/);
      expect(mtls.logs.some((l) => l.principal === 'cert:flink-operator')).toBe(true);
    } finally {
      await agent.close();
      await mtls.close();
      rmSync(tlsDir, { recursive: true, force: true });
    }
  });
});
