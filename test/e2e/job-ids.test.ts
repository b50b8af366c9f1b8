import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorCode, json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway, writeTokensFile } from '../helpers/gateway';

/**
 * One rule for job ids on the real embedded Flink (ADR 0030): a retry —
 * same jobId, same principal, same request — gets the first result; anything else under a used id is
 * 409 GW_RUN_JOB_ID_CONFLICT, both while the first result is remembered and after (when Flink's own
 * duplicate-id 400 is what the gateway sees). Never a 200 for a run that did not happen.
 */

const alice = { authorization: 'Bearer tok-alice' };
const bob = { authorization: 'Bearer tok-bob' };

describe.each([
  ['while the first result is remembered', '1 h'],
  ['after the gateway forgot the first result (Flink answers the duplicate)', '0 ms'],
])('job ids %s', (_when, retention) => {
  let gw: TestGateway;
  let dir: string;
  let jar: string;
  let bobJar: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-job-ids-'));
    writeTokensFile(join(dir, 'tokens'), { alice: 'tok-alice', bob: 'tok-bob' });
    gw = await startGateway(flinkUrl(), { 'gateway.auth.tokens-file': join(dir, 'tokens'), 'gateway.run.dedupe-retention': retention });
    const up = await uploadBytes(gw.url, [{ name: 'WordCount.jar', bytes: readFileSync(WORDCOUNT_JAR) }], {}, alice);
    jar = String(up.body.filename).split('/').pop()!;
    const bobs = await uploadBytes(gw.url, [{ name: 'WordCount.jar', bytes: readFileSync(WORDCOUNT_JAR) }], {}, bob);
    bobJar = String(bobs.body.filename).split('/').pop()!;
  }, 60_000);

  afterAll(async () => {
    await json('DELETE', `${gw.url}/v1/jars/${jar}`, undefined, alice).catch(() => undefined);
    await json('DELETE', `${gw.url}/v1/jars/${bobJar}`, undefined, bob).catch(() => undefined);
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a retry gets the first result; another principal or another request under the id gets 409, and nothing else runs', async () => {
    const jobId = newJobId();
    const body = { jobId, parallelism: 1, programArgsList: ['--parallelism', '1'] };
    const first = await json('POST', `${gw.url}/v1/jars/${jar}/run`, body, alice);
    expect(first).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'], 90_000, alice)).toBe('FINISHED');

    const retry = await json('POST', `${gw.url}/v1/jars/${jar}/run`, body, alice);
    expect(retry).toMatchObject({ status: 200, body: { jobid: jobId } });

    // Bob may not even use Alice's jar (GW_AUTH_JAR_OWNER); with a jar of his own, the id is still hers.
    expect(errorCode(await json('POST', `${gw.url}/v1/jars/${jar}/run`, body, bob))).toBe('GW_AUTH_JAR_OWNER');
    const byBob = await json('POST', `${gw.url}/v1/jars/${bobJar}/run`, body, bob);
    expect({ status: byBob.status, code: errorCode(byBob) }).toEqual({ status: 409, code: 'GW_RUN_JOB_ID_CONFLICT' });
    const changed = await json('POST', `${gw.url}/v1/jars/${jar}/run`, { ...body, parallelism: 2 }, alice);
    expect({ status: changed.status, code: errorCode(changed) }).toEqual({ status: 409, code: 'GW_RUN_JOB_ID_CONFLICT' });
    const viaConfig = await json(
      'POST',
      `${gw.url}/v1/jars/${bobJar}/run`,
      { parallelism: 1, flinkConfiguration: { '$internal.pipeline.job-id': jobId } },
      bob,
    );
    expect(viaConfig.status).toBe(409);

    const overview = await json('GET', `${gw.url}/v1/jobs/overview`, undefined, alice);
    const mine = (overview.body.jobs as { jid: string }[]).filter((j) => j.jid === jobId);
    expect(mine).toHaveLength(1);
    const audit = gw.audit().filter((a) => a.audit === 'submission' && a.jobId === jobId);
    // The retry is audited too (deduplicated, or accepted once Flink reports the job as already there).
    expect(audit.filter((a) => a.outcome === 'accepted' || a.outcome === 'deduplicated').map((a) => a.principal)).toEqual([
      'token:alice',
      'token:alice',
    ]);
    expect(audit.filter((a) => a.error === 'GW_RUN_JOB_ID_CONFLICT').map((a) => a.principal)).toEqual([
      'token:bob',
      'token:alice',
      'token:bob',
    ]);
    expect(audit.filter((a) => a.jarId === bobJar && a.outcome === 'accepted')).toEqual([]);
  }, 120_000);

  it('a run that never started frees its id: a corrected request may use it', async () => {
    const jobId = newJobId();
    const bad = await json('POST', `${gw.url}/v1/jars/${jar}/run`, { jobId, entryClass: 'com.example.Missing' }, alice);
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).not.toBe(409);
    const good = await json('POST', `${gw.url}/v1/jars/${jar}/run`, { jobId, parallelism: 1 }, alice);
    expect(good).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'], 90_000, alice)).toBe('FINISHED');
  }, 120_000);

  it('takes the job id from $internal.pipeline.job-id when the body has none (as Flink 2.x does)', async () => {
    const jobId = newJobId();
    const r = await json(
      'POST',
      `${gw.url}/v1/jars/${jar}/run`,
      { parallelism: 1, flinkConfiguration: { '$internal.pipeline.job-id': jobId } },
      alice,
    );
    expect(r).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'], 90_000, alice)).toBe('FINISHED');
  }, 120_000);
});
