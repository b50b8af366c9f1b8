import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gcsPlugin } from '../../fs-plugins/gcs';
import { json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { startFakeGcs, type FakeGcs } from '../servers/fake-gcs';
import {
  makeServiceAccount,
  startGcsFront,
  startGoogleTokenStandIn,
  writeKeyFile,
  type GcsFront,
  type GoogleTokenStandIn,
} from '../servers/fake-gcs-auth';
import { makeSelfSignedCert } from '../servers/tls';

const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });

/**
 * The operator's FlinkSessionJob path with a gs:// jar: a manifest-only placeholder run with the session
 * job's config naming the real jar by a gs:// URI. The gateway fetches it with the cluster's
 * service-account key (its assertion verified by a local token endpoint, the token checked by an HTTPS
 * front before fake-gcs-server) and the real Flink cluster runs it.
 */
describe('remote job jars by gs:// URI on the real embedded Flink', () => {
  let emulator: FakeGcs;
  let token: GoogleTokenStandIn;
  let front: GcsFront;
  let gw: TestGateway;
  let dir: string;
  const objectName = `wc-${randomBytes(4).toString('hex')}.jar`;
  const uri = `gs://team-a-jars/jobs/${objectName}`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'e2e-gcs-'));
    const tls = makeSelfSignedCert();
    writeFileSync(join(dir, 'ca.pem'), tls.cert);
    const account = makeServiceAccount();
    emulator = await startFakeGcs();
    await emulator.createBucket('team-a-jars');
    await emulator.upload('team-a-jars', `jobs/${objectName}`, readFileSync(WORDCOUNT_JAR));
    token = await startGoogleTokenStandIn({ tls, accounts: [account] });
    front = await startGcsFront({ tls, target: emulator.url, issued: token.issued });
    await writeKeyFile(join(dir, 'key.json'), account, token.tokenUrl);
    gw = await startGateway(
      flinkUrl(),
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'https;gs',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${front.port};127.0.0.1:${token.port}`,
        'gateway.artifacts.ca-bundle': join(dir, 'ca.pem'),
        'gs.auth.type': 'SERVICE_ACCOUNT_JSON_KEYFILE',
        'gs.auth.service.account.json.keyfile': join(dir, 'key.json'),
        'gs.storage.root.url': front.url,
      },
      [gcsPlugin],
    );
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    await front?.stop();
    await token?.stop();
    await emulator?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("runs a jar named by a gs:// URI to FINISHED, read with the service account's token, and deletes the transient jar", async () => {
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    expect(up.status).toBe(200);
    const placeholder = String(up.body.filename).split('/').pop()!;
    const jobId = newJobId();
    const run = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      entryClass: 'org.apache.flink.streaming.examples.wordcount.WordCount',
      programArgsList: [],
      jobId,
      flinkConfiguration: { 'user.artifacts.job-jar': uri, 'parallelism.default': '1' },
    });
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`);
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect(token.requests.filter((r) => r.valid).length).toBeGreaterThan(0);
    expect(front.records.filter((r) => r.path.includes(encodeURIComponent(`jobs/${objectName}`)))).not.toEqual([]);
    expect(front.records.every((r) => r.authorized)).toBe(true);
    const jars = await json('GET', `${gw.url}/jars`);
    expect((jars.body.files as { name: string }[]).map((f) => f.name)).not.toContain(objectName);
  });

  it('a missing gs:// object is named clearly and nothing runs', async () => {
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    const placeholder = String(up.body.filename).split('/').pop()!;
    const run = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      entryClass: 'org.apache.flink.streaming.examples.wordcount.WordCount',
      jobId: newJobId(),
      flinkConfiguration: { 'user.artifacts.job-jar': 'gs://team-a-jars/jobs/nope.jar' },
    });
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`);
    expect(run.status).toBe(400);
    expect(JSON.stringify(run.body)).toContain('GW_FETCH_NOT_FOUND');
  });
});
