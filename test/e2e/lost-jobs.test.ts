import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { httpPlugin } from '../../fs-plugins/http';
import { EmbeddedCluster } from '../../src/cluster/embedded-cluster';
import { projectRoot } from '../../src/project-root';
import { errorCode, json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';
import { startGateway, type TestGateway } from '../helpers/gateway';
import { operatorPlaceholderJar } from '../helpers/operator-placeholder';
import { type HttpOrigin, startHttpOrigin } from '../servers/http-origin';
import { type HttpRelay, startHttpRelay } from '../servers/http-relay';

/**
 * A lost job is started again (the operator's reconcile loop after a JobManager restart without
 * HA). A cluster of this test's own — never the shared one — sits behind an HTTP relay, so that a
 * "restarted JobManager" (a new JVM on a new port) answers at the address the gateway knows, while
 * the gateway stays up. The operator's FlinkSessionJob path: a placeholder upload, a run by URI with
 * the session job's merged configuration under the operator's job id.
 */
describe('a streaming job lost by a JobManager restart without HA', () => {
  let cluster: EmbeddedCluster | undefined;
  let proxy: HttpRelay;
  let origin: HttpOrigin;
  let gw: TestGateway;
  let other: TestGateway | undefined;
  let placeholder: Buffer;
  let inputDir: string;

  const startCluster = () =>
    EmbeddedCluster.start({
      rootDir: projectRoot(__dirname),
      jvmOptions: ['-Xmx512m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'],
      slots: 2,
      startupTimeoutMs: 240_000,
      log: pino({ level: 'silent' }),
    });

  /** Stops the JobManager and starts a new one (no HA: it knows no job), at the same address for the gateway. */
  async function restartJobManager(): Promise<void> {
    await cluster?.stop();
    cluster = await startCluster();
    proxy.retarget(cluster.restUrl);
  }

  beforeAll(async () => {
    placeholder = await operatorPlaceholderJar();
    inputDir = mkdtempSync(join(tmpdir(), 'gw-lost-jobs-input-'));
    writeFileSync(join(inputDir, 'lines.txt'), 'to be or not to be\n');
    origin = await startHttpOrigin({ files: { '/jobs/wordcount.jar': readFileSync(WORDCOUNT_JAR) } });
    cluster = await startCluster();
    proxy = await startHttpRelay(cluster.restUrl);
    gw = await startGateway(
      proxy.url,
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
      },
      [httpPlugin],
    );
  }, 300_000);

  afterAll(async () => {
    await other?.close();
    await gw?.close();
    await cluster?.stop();
    await proxy?.stop();
    await origin?.stop();
    rmSync(inputDir, { recursive: true, force: true });
  });

  /** The operator's FlinkSessionJob submission, as its AbstractFlinkService sends it. */
  async function operatorRun(through: TestGateway, jobId: string, flinkConfiguration: Record<string, string>) {
    const up = await uploadBytes(through.url, [{ name: 'empty.jar', bytes: placeholder, field: 'file_0' }], { request: '{}' });
    expect(up.status).toBe(200);
    const jarId = String(up.body.filename).split('/').pop()!;
    try {
      return await json('POST', `${through.url}/v1/jars/${jarId}/run`, {
        entryClass: WORDCOUNT_CLASS,
        programArgsList: ['--input', inputDir, '--discovery-interval', '1s'],
        jobId,
        claimMode: 'NO_CLAIM',
        flinkConfiguration: { 'user.artifacts.job-jar': `${origin.url}/jobs/wordcount.jar`, ...flinkConfiguration },
      });
    } finally {
      await json('DELETE', `${through.url}/v1/jars/${jarId}`);
    }
  }
  const jobsNamed = async (jobId: string) => {
    const overview = await json('GET', `${gw.url}/v1/jobs/overview`);
    if (overview.status !== 200) throw new Error(`jobs overview: ${overview.status} ${JSON.stringify(overview.body).slice(0, 500)}`);
    return (overview.body.jobs as { jid: string; state: string }[]).filter((j) => j.jid === jobId);
  };

  it('runs it again under its id (and once with a changed configuration); Flink refusing a held id is still a 409', async () => {
    const jobId = newJobId();
    const conf = { 'parallelism.default': '1', 'kubernetes.cluster-id': 'session-a', 'execution.checkpointing.interval': '30 s' };
    expect(await operatorRun(gw, jobId, conf)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['RUNNING', 'FINISHED', 'FAILED'])).toBe('RUNNING');
    // While the JobManager knows the job, the operator's retry is answered from memory: no second job.
    expect(await operatorRun(gw, jobId, conf)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await jobsNamed(jobId)).toHaveLength(1);

    await restartJobManager();
    expect((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).status).toBe(404);
    expect(await operatorRun(gw, jobId, conf)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['RUNNING', 'FINISHED', 'FAILED'])).toBe('RUNNING');

    await restartJobManager();
    // The operator merges the cluster's configuration into every run: after a change it differs.
    const changed = { ...conf, 'execution.checkpointing.interval': '60 s' };
    expect(await operatorRun(gw, jobId, changed)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['RUNNING', 'FINISHED', 'FAILED'])).toBe('RUNNING');
    expect(await jobsNamed(jobId)).toEqual([expect.objectContaining({ state: 'RUNNING' })]);

    // A gateway with no memory of the run (its own claims) sends another request under the id to
    // Flink, whose dispatcher refuses it: 409, with Flink's own words after the gateway's.
    other = await startGateway(
      proxy.url,
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
      },
      [httpPlugin],
    );
    const refused = await operatorRun(other, jobId, { ...changed, 'parallelism.default': '2' });
    expect({ status: refused.status, code: errorCode(refused) }).toEqual({ status: 409, code: 'GW_RUN_JOB_ID_CONFLICT' });
    expect(Object.keys(refused.body)).toEqual(['errors']);
    expect((refused.body.errors as string[]).slice(1).join('\n')).toContain('DuplicateJobSubmissionException');
    expect(await jobsNamed(jobId)).toEqual([expect.objectContaining({ state: 'RUNNING' })]);
    await json('PATCH', `${gw.url}/v1/jobs/${jobId}?mode=cancel`);
  }, 900_000);
});
