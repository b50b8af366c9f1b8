import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { json } from '../../helpers/flink';
import { startGateway, type TestGateway, writeTokensFile } from '../../helpers/gateway';
import { type FakeJobManager, startFakeJobManager } from '../../servers/fake-jobmanager';

const alice = { authorization: 'Bearer tok-alice' };
const bob = { authorization: 'Bearer tok-bob' };

/**
 * What the dashboard sees of the gateway, against a node:http JobManager stand-in: the gateway's own
 * answers carry the CORS origin the JobManager sets (its web.access-control-allow-origin), not a
 * fixed `*`; and `GET /config` says `features.web-submit: false` to a caller that cannot submit.
 */
describe('the dashboard configuration and CORS as the JobManager sets them', () => {
  let jm: FakeJobManager;
  let dir: string;
  const gateways: TestGateway[] = [];

  beforeEach(async () => {
    jm = await startFakeJobManager();
    dir = mkdtempSync(join(tmpdir(), 'gw-dashboard-'));
    writeTokensFile(join(dir, 'tokens'), { alice: 'tok-alice', bob: 'tok-bob' });
  });
  afterEach(async () => {
    for (const g of gateways.splice(0)) await g.close();
    await jm.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async (options: Record<string, string>) => {
    const g = await startGateway(jm.url, options);
    gateways.push(g);
    return g;
  };

  it("answers with the JobManager's Access-Control-Allow-Origin on the gateway's own answers, success and error", async () => {
    jm.allowOrigin = 'https://dashboard.example';
    const gw = await start({});
    await json('GET', `${gw.url}/v1/config`);
    const list = await json('GET', `${gw.url}/v1/jars`);
    const missing = await json('POST', `${gw.url}/v1/jars/nope_x.jar/run`, {});
    const unknown = await json('GET', `${gw.url}/gateway/v1/fetches/nope`);
    expect([list.status, missing.status, unknown.status]).toEqual([200, 400, 404]);
    for (const r of [list, missing, unknown]) expect(r.headers['access-control-allow-origin']).toBe('https://dashboard.example');
  });

  it("uses the cluster configuration's web.access-control-allow-origin before the JobManager has answered", async () => {
    writeFileSync(join(dir, 'flink-conf.yaml'), 'web.access-control-allow-origin: https://ops.example\n');
    const gw = await start({ 'gateway.cluster.flink-conf': join(dir, 'flink-conf.yaml') });
    const r = await json('GET', `${gw.url}/gateway/v1/fetches/nope`);
    expect(r.headers['access-control-allow-origin']).toBe('https://ops.example');
  });

  it('says features.web-submit: false to a principal that may not submit, and to everyone under fetched-only', async () => {
    const gw = await start({ 'gateway.auth.tokens-file': join(dir, 'tokens'), 'gateway.auth.permission.submit': 'token:alice' });
    const features = async (g: TestGateway, headers: Record<string, string>) =>
      (await json('GET', `${g.url}/config`, undefined, headers)).body.features as Record<string, unknown>;
    expect(await features(gw, alice)).toMatchObject({ 'web-submit': true, 'web-cancel': true });
    expect(await features(gw, bob)).toMatchObject({ 'web-submit': false, 'web-cancel': true });
    // The operator's start-up probe: no credentials, still answered, and never offered a submit page.
    const probe = await json('GET', `${gw.url}/v1/config`);
    expect(probe).toMatchObject({ status: 200, body: { 'flink-version': '2.1.0', features: { 'web-submit': false } } });
    const fetchedOnly = await start({ 'gateway.policy.mode': 'fetched-only' });
    expect(await features(fetchedOnly, {})).toMatchObject({ 'web-submit': false });
  });
});
