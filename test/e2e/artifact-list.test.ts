import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpPlugin } from '../../fs-plugins/http';
import { projectRoot } from '../../src/project-root';
import { errorCode, json, newJobId, uploadBytes, waitForJobState } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';

/**
 * Session-job dependencies (fidelity item 15) on the real embedded Flink: `user.artifacts.artifact-list`
 * on a run by URI. UdfJob.jar calls a class that only ShoutUdf.jar holds, in main() and in a task; the
 * gateway hands Flink the job jar with the artifact nested under lib/, which Flink's PackagedProgram
 * puts on the job's user classpath. Artifacts pass the same allow-list as the job jar, and an
 * unchanged set is built into one cached jar once.
 */
const JARS = join(projectRoot(__dirname), 'embedded-flink', 'target', 'test-jars');
const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });

describe('user.artifacts.artifact-list for session jobs', () => {
  let o: HttpOrigin;
  let gw: TestGateway;
  let cacheDir: string;
  let placeholder: string;

  beforeAll(async () => {
    o = await startHttpOrigin({
      files: {
        '/ok/udf-job.jar': readFileSync(join(JARS, 'UdfJob.jar')),
        '/ok/shout-udf.jar': readFileSync(join(JARS, 'ShoutUdf.jar')),
        '/elsewhere/shout-udf.jar': readFileSync(join(JARS, 'ShoutUdf.jar')),
      },
    });
    cacheDir = join(mkdtempSync(join(tmpdir(), 'gw-artifacts-')), 'cache');
    gw = await startGateway(
      flinkUrl(),
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${o.port}`,
        'gateway.artifacts.allowed-uris': `${o.url}/ok/`,
        'gateway.artifacts.cache-dir': cacheDir,
      },
      [httpPlugin],
    );
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    placeholder = String(up.body.filename).split('/').pop()!;
  }, 60_000);
  afterAll(async () => {
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`).catch(() => undefined);
    await gw?.close();
    await o?.stop();
    rmSync(join(cacheDir, '..'), { recursive: true, force: true });
  });

  const run = (config: Record<string, string>) =>
    json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      jobId: newJobId(),
      flinkConfiguration: { 'user.artifacts.job-jar': `${o.url}/ok/udf-job.jar`, ...config },
    });

  it('without the artifact the job cannot find its UDF; with it, the UDF runs in main() and in a task', async () => {
    const without = await run({});
    expect(without.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(without.body)).toMatch(/Shout|NoClassDefFound|ClassNotFound/);
    for (let i = 0; i < 2; i++) {
      const r = await run({ 'user.artifacts.artifact-list': `${o.url}/ok/shout-udf.jar` });
      expect(r.status).toBe(200);
      expect(await waitForJobState(gw.url, String(r.body.jobid), ['FINISHED', 'FAILED'])).toBe('FINISHED');
    }
    // One nested jar for the unchanged set, however many runs.
    expect(readdirSync(join(cacheDir, 'index')).filter((f) => f.startsWith('nested-'))).toHaveLength(1);
    const audit = gw.audit().filter((a) => a.audit === 'fetch' && String(a.uri).endsWith('shout-udf.jar'));
    expect(audit.length).toBeGreaterThanOrEqual(2);
  }, 180_000);

  it('holds artifacts to the allow-list; artifact-list without a job jar URI is ignored (as Flink does in session mode)', async () => {
    const refused = await run({ 'user.artifacts.artifact-list': `${o.url}/elsewhere/shout-udf.jar` });
    expect({ status: refused.status, code: errorCode(refused) }).toEqual({ status: 400, code: 'GW_FETCH_URI_NOT_ALLOWED' });
    expect(o.requests.filter((r) => r.path.startsWith('/elsewhere'))).toEqual([]);
    // The operator merges the cluster's configuration (which may set the key) into every run of an
    // uploaded jar: the run goes on without it, the audit record says so, nothing is fetched.
    const up = await uploadBytes(gw.url, [{ name: 'udf-job.jar', bytes: readFileSync(join(JARS, 'WordCount.jar')) }]);
    const jarId = String(up.body.filename).split('/').pop()!;
    const before = o.requests.length;
    const noUri = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId: newJobId(),
      flinkConfiguration: { 'user.artifacts.artifact-list': `${o.url}/ok/shout-udf.jar` },
    });
    expect(noUri.status).toBe(200);
    expect(await waitForJobState(gw.url, String(noUri.body.jobid), ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect(o.requests.length).toBe(before);
    const verdicts = gw.audit().find((a) => a.audit === 'submission' && a.jobId === noUri.body.jobid)?.verdicts as Record<string, string>;
    expect(verdicts.artifacts).toMatch(/^ignored: user\.artifacts\.artifact-list without user\.artifacts\.job-jar/);
    await json('DELETE', `${gw.url}/v1/jars/${jarId}`);
  });
});
