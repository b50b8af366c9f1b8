import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { json, newJobId, uploadFile, waitForJobState, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';

describe('jar lifecycle on the real embedded Flink cluster, through the gateway', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway(flinkUrl());
  });
  afterAll(async () => gw.close());

  it('uploads WordCount, lists it, plans, runs it to FINISHED and deletes it', async () => {
    const up = await uploadFile(gw.url, WORDCOUNT_JAR, 'WordCount.jar');
    expect(up.status).toBe(200);
    expect(up.body.status).toBe('success');
    const filename = String(up.body.filename);
    const jarId = filename.substring(filename.lastIndexOf('/') + 1);
    expect(jarId).toMatch(/^[0-9a-f-]{36}_WordCount\.jar$/);

    const list = await json('GET', `${gw.url}/jars`);
    expect(list.status).toBe(200);
    const files = list.body.files as { id: string; name: string; entry: { name: string }[] }[];
    const mine = files.find((f) => f.id === jarId);
    expect(mine?.name).toBe('WordCount.jar');
    expect(mine?.entry.map((e) => e.name)).toContain(WORDCOUNT_CLASS);

    const plan = await json('POST', `${gw.url}/v1/jars/${jarId}/plan`, {});
    expect(plan.status).toBe(200);
    expect((plan.body.plan as { nodes: unknown[] }).nodes.length).toBeGreaterThan(0);

    const jobId = newJobId();
    const run = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, { jobId, programArgsList: [] });
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');

    expect(await json('DELETE', `${gw.url}/jars/${jarId}`)).toMatchObject({ status: 200, body: {} });
    const again = await json('DELETE', `${gw.url}/jars/${jarId}`);
    expect(again.status).toBe(400);
    expect((again.body.errors as string[])[0]).toMatch(/^GW_JAR_NOT_FOUND: /);
  });

  it('generates a jobId when none is given and answers with lowercase jobid', async () => {
    const up = await uploadFile(gw.url, WORDCOUNT_JAR, 'WordCount.jar');
    const jarId = String(up.body.filename).split('/').pop()!;
    const run = await json('POST', `${gw.url}/jars/${jarId}/run?parallelism=1`, '');
    expect(run.status).toBe(200);
    expect(Object.keys(run.body)).toEqual(['jobid']);
    expect(run.body.jobid).toMatch(/^[0-9a-f]{32}$/);
    await waitForJobState(gw.url, String(run.body.jobid), ['FINISHED']);
    await json('DELETE', `${gw.url}/jars/${jarId}`);
  });

  it('runs are single-flight by jobId: retries and concurrent duplicates return the first result', async () => {
    const up = await uploadFile(gw.url, WORDCOUNT_JAR, 'WordCount.jar');
    const jarId = String(up.body.filename).split('/').pop()!;
    const jobId = newJobId();
    const body = { jobId, claimMode: 'NO_CLAIM', flinkConfiguration: { 'parallelism.default': '1' } };
    const [a, b] = await Promise.all([
      json('POST', `${gw.url}/v1/jars/${jarId}/run`, body),
      json('POST', `${gw.url}/v1/jars/${jarId}/run`, body),
    ]);
    const c = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, body);
    for (const r of [a, b, c]) expect(r).toMatchObject({ status: 200, body: { jobid: jobId } });
    const overview = await json('GET', `${gw.url}/v1/jobs/overview`);
    expect((overview.body.jobs as { jid: string }[]).filter((j) => j.jid === jobId)).toHaveLength(1);
    await waitForJobState(gw.url, jobId, ['FINISHED']);
    await json('DELETE', `${gw.url}/jars/${jarId}`);
  });

  it('serves the Web UI and cluster endpoints through the pass-through', async () => {
    const index = await fetch(`${gw.url}/`);
    expect(index.status).toBe(200);
    expect(await index.text()).toMatch(/<html/i);
    const overview = await json('GET', `${gw.url}/overview`);
    expect(overview.body['slots-total']).toBeGreaterThanOrEqual(4);
    const config = await json('GET', `${gw.url}/config`);
    expect(String(config.body['flink-version'])).toMatch(/^2\.1\./);
  });
});
