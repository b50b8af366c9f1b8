// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpPlugin } from '../../fs-plugins/http';
import { errorCode, json, uploadBytes } from '../helpers/flink';
import { startGateway, type TestGateway, writeTokensFile } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { startFakeJobManager, type FakeJobManager } from '../servers/fake-jobmanager';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';

/**
 * A submitter may not run, plan or delete a jar
 * another principal put on the JobManager through the gateway; fetched provenance cannot be forged
 * (covered in test/unit/submission/entry-class-policy.test.ts). What the jars may take is
 * test/security/jar-budget.test.ts's.
 */

const alice = { authorization: 'Bearer tok-alice' };
const bob = { authorization: 'Bearer tok-bob' };
const JAR = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': 'x' });

describe('jars belong to the principal that put them on the JobManager', () => {
  let jm: FakeJobManager;
  let origin: HttpOrigin;
  let gw: TestGateway;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-jar-owner-'));
    writeTokensFile(join(dir, 'tokens'), { alice: 'tok-alice', bob: 'tok-bob' });
    jm = await startFakeJobManager();
    origin = await startHttpOrigin({ files: { '/app.jar': JAR } });
    gw = await startGateway(
      jm.url,
      {
        'gateway.auth.tokens-file': join(dir, 'tokens'),
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
        'gateway.artifacts.handoff': 'upload',
      },
      [httpPlugin],
    );
  });
  afterAll(async () => {
    await gw.close();
    await jm.stop();
    await origin.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an uploaded jar: another submitter may not run, plan or delete it; its owner may', async () => {
    const up = await uploadBytes(gw.url, [{ name: 'app.jar', bytes: JAR }], {}, alice);
    const id = String(up.body.filename).split('/').pop()!;
    for (const [method, path] of [
      ['POST', `/v1/jars/${id}/run`],
      ['POST', `/v1/jars/${id}/plan`],
      ['GET', `/v1/jars/${id}/plan`],
      ['DELETE', `/v1/jars/${id}`],
    ] as const) {
      const r = await json(method, `${gw.url}${path}`, method === 'POST' ? {} : undefined, bob);
      expect({ method, path, status: r.status, code: errorCode(r) }).toEqual({ method, path, status: 403, code: 'GW_AUTH_JAR_OWNER' });
    }
    expect(jm.runs).toHaveLength(0);
    expect((await json('POST', `${gw.url}/v1/jars/${id}/run`, {}, alice)).status).toBe(200);
    expect((await json('DELETE', `${gw.url}/v1/jars/${id}`, undefined, alice)).status).toBe(200);
  });

  it("a jar from POST /jars/fetch is its principal's; each fetch is its own jar (as each upload is), bounded per principal", async () => {
    const first = await json('POST', `${gw.url}/v1/jars/fetch`, { uri: `${origin.url}/app.jar` }, alice);
    const second = await json('POST', `${gw.url}/v1/jars/fetch`, { uri: `${origin.url}/app.jar` }, alice);
    expect([first.status, second.status]).toEqual([200, 200]);
    // Two callers of one principal may each delete their own copy without breaking the other's run.
    expect(second.body.filename).not.toBe(first.body.filename);
    const id = String(first.body.filename).split('/').pop()!;
    expect(errorCode(await json('POST', `${gw.url}/v1/jars/${id}/run`, {}, bob))).toBe('GW_AUTH_JAR_OWNER');
    expect(errorCode(await json('DELETE', `${gw.url}/v1/jars/${id}`, undefined, bob))).toBe('GW_AUTH_JAR_OWNER');
    for (const r of [first, second])
      expect((await json('DELETE', `${gw.url}/v1/jars/${String(r.body.filename).split('/').pop()}`, undefined, alice)).status).toBe(200);
  });
});
