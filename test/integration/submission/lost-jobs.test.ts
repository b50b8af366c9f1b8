import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorCode, json, newJobId, uploadBytes } from '../../helpers/flink';
import { startGateway, type TestGateway, writeTokensFile } from '../../helpers/gateway';
import { buildJar } from '../../helpers/jars';
import { type FakeJobManager, startFakeJobManager } from '../../servers/fake-jobmanager';

const alice = { authorization: 'Bearer tok-alice' };
const bob = { authorization: 'Bearer tok-bob' };
const JAR = buildJar({
  'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: com.example.Job\n',
  'com/example/Job.class': Buffer.from('cafebabe', 'hex'),
});

/**
 * The retry rule asks the JobManager (a node:http stand-in that knows the jobs it accepted and
 * refuses an id it has, as Flink's dispatcher does): a remembered outcome or claim answers only
 * while the JobManager still knows the job; a job it lost (a restart without HA) is run again under
 * its id, whatever changed, and Flink's own refusal of an id is a 409, never a 200. The end-to-end
 * version on a real JobManager restart is test/e2e/lost-jobs.test.ts.
 */
describe.each([
  ['remembered outcome and claim', '1 h'],
  ['claim only', '0 ms'],
])('a job the JobManager lost (%s)', (_what, retention) => {
  let jm: FakeJobManager;
  let gw: TestGateway;
  let dir: string;

  beforeEach(async () => {
    jm = await startFakeJobManager();
    dir = mkdtempSync(join(tmpdir(), 'gw-lost-jobs-'));
    writeTokensFile(join(dir, 'tokens'), { alice: 'tok-alice', bob: 'tok-bob' });
    gw = await startGateway(jm.url, {
      'gateway.auth.tokens-file': join(dir, 'tokens'),
      'gateway.run.dedupe-retention': retention,
      'gateway.tokens.store-dir': join(dir, 'store'),
    });
  });
  afterEach(async () => {
    await gw.close();
    await jm.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** What the operator does for a jarURI session job: upload a fresh copy of the jar, run it under its job id. */
  async function operatorRun(jobId: string, flinkConfiguration: Record<string, string>, who = alice) {
    const up = await uploadBytes(gw.url, [{ name: 'app.jar', bytes: JAR, field: 'file_0' }], { request: '{}' }, who);
    expect(up.status).toBe(200);
    const jarId = String(up.body.filename).split('/').pop()!;
    return json(
      'POST',
      `${gw.url}/v1/jars/${jarId}/run`,
      { entryClass: 'com.example.Job', programArgsList: [], jobId, claimMode: 'NO_CLAIM', flinkConfiguration },
      who,
    );
  }

  it('answers a retry from memory while the JobManager knows the job, even with a fresh upload of the same bytes', async () => {
    const jobId = newJobId();
    const conf = { 'parallelism.default': '1', 'kubernetes.cluster-id': 'session-a' };
    expect(await operatorRun(jobId, conf)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await operatorRun(jobId, conf)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(jm.runs.filter((r) => r.jobId === jobId)).toHaveLength(1);
    // Anything else under the id is refused while the job is known, and nothing reaches the JobManager.
    const changed = await operatorRun(jobId, { ...conf, 'parallelism.default': '2' });
    expect({ status: changed.status, code: errorCode(changed) }).toEqual({ status: 409, code: 'GW_RUN_JOB_ID_CONFLICT' });
    const byBob = await operatorRun(jobId, conf, bob);
    expect({ status: byBob.status, code: errorCode(byBob) }).toEqual({ status: 409, code: 'GW_RUN_JOB_ID_CONFLICT' });
    expect(jm.runs.filter((r) => r.jobId === jobId)).toHaveLength(1);
  });

  it('runs the same request again once the JobManager lost the job, and once more with a changed configuration', async () => {
    const jobId = newJobId();
    const conf = { 'parallelism.default': '1', 'kubernetes.cluster-id': 'session-a' };
    expect(await operatorRun(jobId, conf)).toMatchObject({ status: 200, body: { jobid: jobId } });
    jm.forgetJobs();
    expect(await operatorRun(jobId, conf)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(jm.runs.filter((r) => r.jobId === jobId)).toHaveLength(2);
    jm.forgetJobs();
    // The operator merges the cluster's configuration into every run: after an upgrade it differs.
    expect(await operatorRun(jobId, { ...conf, 'parallelism.default': '2' })).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(jm.runs.filter((r) => r.jobId === jobId).map((r) => r.flinkConfiguration['parallelism.default'])).toEqual(['1', '1', '2']);
    const audit = gw.audit().filter((a) => a.audit === 'submission' && a.jobId === jobId);
    expect(audit.map((a) => [a.outcome, (a.verdicts as Record<string, string>).jobId ?? ''])).toEqual([
      ['accepted', ''],
      ['accepted', 'earlier run gone from the JobManager'],
      ['accepted', 'earlier run gone from the JobManager'],
    ]);
  });

  it('lets Flink decide an id it lost track of: its refusal (job-result store) is 409 with its own words, never a 200', async () => {
    const jobId = newJobId();
    const conf = { 'parallelism.default': '1' };
    expect(await operatorRun(jobId, conf)).toMatchObject({ status: 200 });
    jm.forgetJobs();
    jm.resultStore.add(jobId);
    const refused = await operatorRun(jobId, conf);
    expect({ status: refused.status, code: errorCode(refused) }).toEqual({ status: 409, code: 'GW_RUN_JOB_ID_CONFLICT' });
    // The JobManager's own text follows the gateway's, verbatim, in the one `errors` key.
    expect(Object.keys(refused.body)).toEqual(['errors']);
    expect((refused.body.errors as string[])[1]).toContain(
      'org.apache.flink.runtime.client.DuplicateJobSubmissionException: Job has already been submitted.',
    );
  });

  it('shares one flight between concurrent retries of a lost job; another principal racing them gets the id or a 409, never both', async () => {
    const jobId = newJobId();
    const conf = { 'parallelism.default': '1' };
    expect(await operatorRun(jobId, conf)).toMatchObject({ status: 200 });
    jm.forgetJobs();
    const upload = async (who: Record<string, string>) =>
      String((await uploadBytes(gw.url, [{ name: 'app.jar', bytes: JAR }], {}, who)).body.filename)
        .split('/')
        .pop()!;
    const [a, b, c] = [await upload(alice), await upload(alice), await upload(bob)];
    const body = { entryClass: 'com.example.Job', programArgsList: [], jobId, flinkConfiguration: conf };
    const [ra, rb, rc] = await Promise.all([
      json('POST', `${gw.url}/v1/jars/${a}/run`, body, alice),
      json('POST', `${gw.url}/v1/jars/${b}/run`, body, alice),
      json('POST', `${gw.url}/v1/jars/${c}/run`, body, bob),
    ]);
    // One request at a time decides; Alice's two share one flight; whoever comes second finds the new job known.
    expect(ra.status).toBe(rb.status);
    expect([ra.status, rc.status].sort()).toEqual([200, 409]);
    expect(jm.runs.filter((r) => r.jobId === jobId)).toHaveLength(2);
  });

  it('answers 503 and runs nothing when the JobManager cannot say whether it knows the job', async () => {
    const jobId = newJobId();
    expect(await operatorRun(jobId, {})).toMatchObject({ status: 200 });
    jm.jobStatusFails = 503;
    const r = await operatorRun(jobId, {});
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 503, code: 'GW_CLUSTER_NOT_READY' });
    expect(jm.runs.filter((x) => x.jobId === jobId)).toHaveLength(1);
  });
});
