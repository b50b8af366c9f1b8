import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filePlugin } from '../../../fs-plugins/file';
import { errorCode, json } from '../../helpers/flink';
import { startGateway, type TestGateway, writeTokensFile } from '../../helpers/gateway';
import { buildJar } from '../../helpers/jars';
import { type FakeJobManager, startFakeJobManager } from '../../servers/fake-jobmanager';

const alice = { authorization: 'Bearer tok-alice' };
const bob = { authorization: 'Bearer tok-bob' };

/**
 * Routes a later Flink adds under /jars reach the JobManager (a node:http stand-in records what it
 * sees), while the routes that run code stay the gateway's by name; the gateway's fetch lives under
 * /gateway/v1, and POST /jars/fetch is its deprecated alias (Deprecation and Link headers).
 */
describe('who owns which /jars route', () => {
  let jm: FakeJobManager;
  let gw: TestGateway;
  let dir: string;

  beforeAll(async () => {
    jm = await startFakeJobManager();
    dir = mkdtempSync(join(tmpdir(), 'gw-jar-routes-'));
    writeFileSync(
      join(dir, 'app.jar'),
      buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': Buffer.from('cafebabe', 'hex') }),
    );
    writeTokensFile(join(dir, 'tokens'), { alice: 'tok-alice', bob: 'tok-bob' });
    gw = await startGateway(
      jm.url,
      {
        'gateway.auth.tokens-file': join(dir, 'tokens'),
        'gateway.auth.permission.submit': 'token:alice',
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.handoff': 'upload',
        'gateway.artifacts.allowed-schemes': 'file',
        'gateway.artifacts.local-file.enabled': 'true',
        'gateway.artifacts.local-file.allowed-dirs': dir,
      },
      [filePlugin],
    );
  });
  afterAll(async () => {
    await gw.close();
    await jm.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['GET', '/v1/jars/abc_x.jar/details'],
    ['POST', '/v1/jars/abc_x.jar/future-route'],
    ['GET', '/jars/abc_x.jar'],
  ])('passes %s %s (a route Flink may add) through to the JobManager, which answers', async (method, path) => {
    const seen = jm.requests.length;
    const r = await json(method, `${gw.url}${path}`, method === 'POST' ? {} : undefined, alice);
    expect(jm.requests.slice(seen)).toEqual([`${method} ${path}`]);
    expect(r).toMatchObject({ status: 404, body: { errors: [expect.stringMatching(/^Not found: /)] } });
  });

  it.each([
    ['GET', '/v1/jars/abc_x.jar/run'],
    ['GET', '/jars/upload'],
    ['PUT', '/v1/jars/abc_x.jar/plan'],
  ])('keeps %s %s (a code-running route by name) to itself: 404, the JobManager never sees it', async (method, path) => {
    const seen = jm.requests.length;
    const r = await json(method, `${gw.url}${path}`, undefined, alice);
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 404, code: 'GW_ROUTE_NOT_FOUND' });
    expect(jm.requests.slice(seen)).toEqual([]);
  });

  it('fetches a jar at POST /gateway/v1/jars/fetch; POST /jars/fetch still works, marked deprecated', async () => {
    const uri = `file://${join(dir, 'app.jar')}`;
    const home = await json('POST', `${gw.url}/gateway/v1/jars/fetch`, { uri }, alice);
    expect(home).toMatchObject({ status: 200, body: { status: 'success' } });
    expect(home.headers.deprecation).toBeUndefined();
    const alias = await json('POST', `${gw.url}/v1/jars/fetch`, { uri }, alice);
    expect(alias).toMatchObject({ status: 200, body: { status: 'success' } });
    expect(alias.headers.deprecation).toBe('@1796515200');
    expect(alias.headers.link).toBe('</gateway/v1/jars/fetch>; rel="successor-version"');
    // An error on the alias says so too.
    const bad = await json('POST', `${gw.url}/jars/fetch`, {}, alice);
    expect({ status: bad.status, code: errorCode(bad), deprecation: bad.headers.deprecation }).toEqual({
      status: 400,
      code: 'GW_REQUEST_MALFORMED',
      deprecation: '@1796515200',
    });
    for (const r of [home, alias]) expect(jm.jars.has(String(r.body.filename).split('/').pop()!)).toBe(true);
  });

  it('asks the submit permission for POST /gateway/v1/jars/fetch, as for its alias', async () => {
    const uri = `file://${join(dir, 'app.jar')}`;
    for (const path of ['/gateway/v1/jars/fetch', '/jars/fetch']) {
      const r = await json('POST', `${gw.url}${path}`, { uri }, bob);
      expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 403, code: 'GW_AUTH_FORBIDDEN' });
    }
  });
});
