import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { azurePlugin } from '../../fs-plugins/azure';
import { s3Plugin } from '../../fs-plugins/s3';
import { json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { startAzurite, uploadBlob, type Azurite } from '../servers/azurite';
import { putObject, startS3Server, type S3Server } from '../servers/s3-server';

const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
const S3_KEY = { accessKeyId: 'AKIDCLUSTERA', secretAccessKey: `s3-secret-${randomBytes(8).toString('hex')}` };
const AZ = { name: 'clustera', key: randomBytes(64).toString('base64') };

/**
 * The operator's FlinkSessionJob path with no operator change: upload a manifest-only placeholder
 * jar, then run it with the session job's whole config, which names the real jar by URI. The gateway
 * fetches it with the cluster's own credentials and the real Flink cluster runs it.
 */
describe('remote job jars on the real embedded Flink', () => {
  let s3: S3Server;
  let azurite: Azurite;
  let gw: TestGateway;
  const objectName = `wc-${randomBytes(4).toString('hex')}.jar`;
  const s3Uri = `s3://team-a-jars/jobs/${objectName}`;
  const azUri = `wasbs://jars@${AZ.name}.blob.core.windows.net/jobs/${objectName}`;

  beforeAll(async () => {
    [s3, azurite] = await Promise.all([
      startS3Server({ keys: { [S3_KEY.accessKeyId]: S3_KEY.secretAccessKey }, buckets: ['team-a-jars'] }),
      startAzurite({ accounts: [AZ] }),
    ]);
    const wordcount = readFileSync(WORDCOUNT_JAR);
    await putObject(s3.url, S3_KEY, 'team-a-jars', `jobs/${objectName}`, wordcount);
    await uploadBlob(azurite, AZ, 'jars', `jobs/${objectName}`, wordcount);
    gw = await startGateway(
      flinkUrl(),
      {
        'web.submit.jar-uri.enable': 'true',
        // The stores this cluster reads from: beyond https, each is the administrator's explicit choice.
        'gateway.artifacts.allowed-schemes': 'https;s3;wasbs',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${s3.port};127.0.0.1:${azurite.port}`,
        's3.endpoint': s3.url,
        's3.path.style.access': 'true',
        's3.access-key': S3_KEY.accessKeyId,
        's3.secret-key': S3_KEY.secretAccessKey,
        [`fs.azure.account.key.${AZ.name}.blob.core.windows.net`]: AZ.key,
        [`fs.azure.account.endpoint.${AZ.name}`]: azurite.blobUrl(AZ.name),
      },
      [s3Plugin, azurePlugin],
    );
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    await Promise.all([s3?.stop(), azurite?.stop()]);
  });

  async function operatorRun(uri: string, extra: Record<string, string> = {}) {
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    expect(up.status).toBe(200);
    const placeholder = String(up.body.filename).split('/').pop()!;
    const jobId = newJobId();
    const run = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      entryClass: 'org.apache.flink.streaming.examples.wordcount.WordCount',
      programArgsList: [],
      jobId,
      claimMode: 'NO_CLAIM',
      flinkConfiguration: {
        'user.artifacts.job-jar': uri,
        'kubernetes.operator.user.artifacts.http.header': 'Authorization:Bearer operator-secret-1',
        's3.secret-key': 'request-secret-2', // a request may not bring credentials: ignored
        'parallelism.default': '1',
        ...extra,
      },
    });
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`);
    return { run, jobId };
  }

  it.each([
    ['S3', () => s3Uri],
    ['Azure Blob', () => azUri],
  ])('runs a jar named by an %s URI to FINISHED and deletes the transient jar', async (_name, uri) => {
    const { run, jobId } = await operatorRun(uri());
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    const jars = await json('GET', `${gw.url}/jars`);
    expect((jars.body.files as { name: string }[]).map((f) => f.name)).not.toContain(objectName);
  });

  it('plans the fetched jar (a dry run for CI)', async () => {
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER }]);
    const placeholder = String(up.body.filename).split('/').pop()!;
    const plan = await json('POST', `${gw.url}/jars/${placeholder}/plan`, { flinkConfiguration: { 'user.artifacts.job-jar': s3Uri } });
    expect(plan.status).toBe(200);
    expect((plan.body.plan as { name: string }).name).toBe('WordCount');
    await json('DELETE', `${gw.url}/jars/${placeholder}`);
  });

  it('fetches by URI with POST /jars/fetch, then runs by id like an upload', async () => {
    const fetched = await json('POST', `${gw.url}/jars/fetch`, { uri: azUri });
    expect(fetched).toMatchObject({ status: 200, body: { status: 'success' } });
    const jarId = String(fetched.body.filename).split('/').pop()!;
    expect(jarId).toMatch(new RegExp(`^[0-9a-f-]{36}_${objectName.replace('.', '\\.')}$`));
    const jobId = newJobId();
    expect(await json('POST', `${gw.url}/jars/${jarId}/run`, { jobId })).toMatchObject({ status: 200, body: { jobid: jobId } });
    await waitForJobState(gw.url, jobId, ['FINISHED']);
    expect((await json('DELETE', `${gw.url}/jars/${jarId}`)).status).toBe(200);
  });

  it('a wrong sha256 pin fails the run before anything starts', async () => {
    const { run, jobId } = await operatorRun(s3Uri, { 'gateway.artifacts.job-jar.sha256': '0'.repeat(64) });
    expect(run.status).toBe(400);
    expect((run.body.errors as string[])[0]).toMatch(/^GW_FETCH_DIGEST_MISMATCH: s3:\/\/team-a-jars\/jobs\//);
    expect((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).status).toBe(404);
  });

  it('names a missing object and a refused credential clearly, without secrets', async () => {
    const missing = await operatorRun('s3://team-a-jars/jobs/nope.jar');
    expect(missing.run.status).toBe(400);
    expect((missing.run.body.errors as string[])[0]).toMatch(/^GW_FETCH_NOT_FOUND: s3:\/\/team-a-jars\/jobs\/nope\.jar does not exist/);
    const otherAccount = await operatorRun(`wasbs://jars@otheraccount.blob.core.windows.net/jobs/${objectName}`);
    expect(otherAccount.run.status).toBeGreaterThanOrEqual(400);
    const everything = JSON.stringify([missing.run.body, otherAccount.run.body, gw.logs]);
    for (const secret of [S3_KEY.secretAccessKey, AZ.key, 'operator-secret-1', 'request-secret-2'])
      expect(everything).not.toContain(secret);
  });

  it('with web.submit.jar-uri.enable off: 400 naming the option, and no job', async () => {
    const off = await startGateway(flinkUrl(), {}, [s3Plugin, azurePlugin]);
    try {
      const up = await uploadBytes(off.url, [{ name: 'empty.jar', bytes: PLACEHOLDER }]);
      const placeholder = String(up.body.filename).split('/').pop()!;
      const jobId = newJobId();
      const run = await json('POST', `${off.url}/v1/jars/${placeholder}/run`, {
        jobId,
        flinkConfiguration: { 'user.artifacts.job-jar': s3Uri },
      });
      expect(run.status).toBe(400);
      expect((run.body.errors as string[])[0]).toMatch(/^GW_JAR_URI_DISABLED: .*web\.submit\.jar-uri\.enable: true/);
      expect((await json('GET', `${off.url}/v1/jobs/${jobId}`)).status).toBe(404);
      await json('DELETE', `${off.url}/jars/${placeholder}`);
    } finally {
      await off.close();
    }
  });
});
