import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { projectRoot } from '../../../src/project-root';
import { Authenticator, parseTokensFile } from '../../../src/http/auth';
import supertest from 'supertest';
import { composeGateway, type ComposedGateway } from '../../helpers/gateway';
import { startOrigin, type Origin } from '../../helpers/origin';
import { startGatewayProcess } from '../../helpers/gateway-process';
import { PROCESS_TIMEOUT_MS, runProcess } from '../../helpers/run-process';
import { captureLogger as captureLog } from '../../helpers/token-fakes';
import { issueCert, makeTestCa } from '../../servers/tls';

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const bin = join(projectRoot(__dirname), 'bin', 'flink-jar-gateway.js');

describe('bearer-token authentication', () => {
  let jm: Origin;
  // In-process (supertest): who gets in is decided on the request, not on the socket.
  let gw: ComposedGateway;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-auth-'));
    writeFileSync(join(dir, 'tokens'), `# principal sha256(token)\nci ${sha('tok-ci-123')}\n`);
    jm = await startOrigin((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url })));
    gw = await composeGateway(jm.url, { 'gateway.auth.tokens-file': join(dir, 'tokens') });
  });
  afterAll(async () => {
    await gw.close();
    await jm.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses a request without a valid token with 401 in Flink's envelope", async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: 'Basic Y2k6dG9r' }]) {
      const r = await supertest(gw.app).get('/v1/jobs/overview').set(headers);
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toContain('Bearer');
      const body = r.body as { errors: string[] };
      expect(Object.keys(body)).toEqual(['errors']);
      expect(body.errors[0]).toMatch(/^GW_AUTH_REQUIRED: /);
    }
  });

  it('lets a valid token through and logs the principal, never the token', async () => {
    const r = await supertest(gw.app).get('/v1/jobs/overview').set('authorization', 'Bearer tok-ci-123');
    expect(r.status).toBe(200);
    const jars = await supertest(gw.app).get('/jars/x/run').set('authorization', 'Bearer tok-ci-123');
    expect(jars.status).toBe(404);
    const logs = JSON.stringify(gw.logs);
    expect(logs).toContain('token:ci');
    expect(logs).not.toContain('tok-ci-123');
  });

  it("keeps health, readiness and GET /config (the operator's startup probe) open", async () => {
    for (const path of ['/gateway/v1/health', '/config', '/v1/config']) {
      expect({ path, status: (await supertest(gw.app).get(path)).status }).toEqual({ path, status: 200 });
    }
    expect((await supertest(gw.app).post('/config')).status).toBe(401);
  });

  it('re-reads the tokens file when it changes (injected clock)', () => {
    const file = join(dir, 'rotating');
    writeFileSync(file, `a ${sha('one')}\n`);
    let now = 0;
    const auth = new Authenticator({ tokensFile: file, mutualTls: false, reloadIntervalMs: 1000, now: () => now });
    const req = (t: string) => ({ headers: { authorization: `Bearer ${t}` }, socket: {} }) as never;
    expect(auth.principalOf(req('one'))).toBe('token:a');
    writeFileSync(file, `b ${sha('two')}\n`);
    now = 5000;
    expect(auth.principalOf(req('two'))).toBe('token:b');
    expect(auth.principalOf(req('one'))).toBeUndefined();
  });

  it('fails closed: a tokens file with a bad line, or gone, accepts no token and says so', () => {
    const file = join(dir, 'revocable');
    writeFileSync(file, `a ${sha('one')}\nb ${sha('two')}\n`);
    let now = 0;
    const cap = captureLog();
    const auth = new Authenticator({ tokensFile: file, mutualTls: false, reloadIntervalMs: 1000, now: () => now, log: cap.log });
    const req = (t: string) => ({ headers: { authorization: `Bearer ${t}` }, socket: {} }) as never;
    expect(auth.principalOf(req('one'))).toBe('token:a');
    // An edit meant to revoke b that breaks a line: nobody gets in, instead of everybody keeping access.
    writeFileSync(file, `a ${sha('one')}\nb not-a-hash-any-more\n`);
    now += 5000;
    expect([auth.principalOf(req('one')), auth.principalOf(req('two'))]).toEqual([undefined, undefined]);
    expect(cap.lines.some((l) => l.level === 50 && /invalid/.test(String(l.msg)))).toBe(true);
    writeFileSync(file, `a ${sha('one')}\n`);
    now += 5000;
    expect([auth.principalOf(req('one')), auth.principalOf(req('two'))]).toEqual(['token:a', undefined]);
    rmSync(file);
    now += 5000;
    expect(auth.principalOf(req('one'))).toBeUndefined();
    expect(cap.lines.some((l) => l.level === 50 && /gone/.test(String(l.msg)))).toBe(true);
  });

  it('rejects a malformed tokens file at start with the line number', () => {
    expect(() => parseTokensFile('ci not-a-hash\n', 'tokens')).toThrow('tokens:1');
  });
});

describe('exposure rule and mutual TLS (the CLI)', () => {
  it('refuses to start on a non-loopback address with jar URIs on and no authentication', async () => {
    const r = await runProcess(
      process.execPath,
      [bin, '-Drest.bind-address=0.0.0.0', '-Dweb.submit.jar-uri.enable=true', '-Dgateway.cluster.rest-url=http://127.0.0.1:9'],
      { timeoutMs: PROCESS_TIMEOUT_MS },
    );
    expect(r.status).toBe(2);
    // The header line with the code, then the one problem.
    expect(r.stderr.trim().split('\n')).toHaveLength(2);
    expect(r.stderr).toMatch(
      /^flink-jar-gateway: GW_CONFIG_INVALID: .*\n {2}- rest\.bind-address \(from -D\): refusing to start: .*gateway\.auth\.tokens-file/,
    );
  });

  it("serves HTTPS and takes the client certificate's CN as the principal", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-mtls-'));
    const ca = makeTestCa(dir, 'test');
    const server = issueCert(dir, ca, 'server', { cn: 'localhost', use: 'server' });
    const client = issueCert(dir, ca, 'client', { cn: 'flink-operator', use: 'client' });
    const jm = await startOrigin((_req, res) => res.end('{}'));
    const gw = await startGatewayProcess([
      `-Dgateway.cluster.rest-url=${jm.url}`,
      '-Drest.port=0',
      `-Dgateway.tls.cert=${server.cert}`,
      `-Dgateway.tls.key=${server.key}`,
      `-Dgateway.tls.client-ca=${ca.cert}`,
      '-Dgateway.log.level=debug',
    ]);
    const url = gw.url;
    try {
      expect(url).toMatch(/^https:/);
      const caPem = readFileSync(ca.cert, 'utf8');
      const withCert = new Agent({ connect: { ca: caPem, cert: readFileSync(client.cert), key: readFileSync(client.key) } });
      const ok = await request(`${url}/v1/overview`, { dispatcher: withCert });
      expect(ok.statusCode).toBe(200);
      await ok.body.dump();
      const noCert = new Agent({ connect: { ca: caPem } });
      const refused = await request(`${url}/v1/overview`, { dispatcher: noCert });
      expect(refused.statusCode).toBe(401);
      await refused.body.dump();
      const probe = await request(`${url}/gateway/v1/health`, { dispatcher: noCert });
      expect(probe.statusCode).toBe(200);
      await probe.body.dump();
      await Promise.all([withCert.close(), noCert.close()]);
    } finally {
      await gw.stop();
      await jm.close();
      rmSync(dir, { recursive: true, force: true });
    }
    expect(gw.output()).toContain('cert:flink-operator');
  });
});
