import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { newJobId, WORDCOUNT_JAR } from '../helpers/flink';
import { runOperatorSequence, type SequenceResult } from '../helpers/java-client';

/**
 * Flink's own Java client (RestClient / RestClusterClient and flink-runtime-web's message headers)
 * replays the Flink Kubernetes Operator's exact submission sequence against the gateway.
 */
describe.each(['2.1', '1.20'] as const)("the operator's sequence with Flink %s client classes", (line) => {
  let gw: TestGateway;
  let out: SequenceResult;
  const jobId = newJobId();

  beforeAll(async () => {
    gw = await startGateway(flinkUrl());
    out = await runOperatorSequence(line, ['--url', gw.url, '--jar', WORDCOUNT_JAR, '--job-id', jobId]);
  }, 300_000);
  afterAll(async () => gw.close());

  it('uses the expected client version', () => {
    expect(String(out.flinkClientVersion)).toMatch(new RegExp(`^${line.replace('.', '\\.')}\\.`));
  });

  it('uploads with file_0 + request={} and gets a filename whose last segment is the jar id', () => {
    expect(out.upload).toMatchObject({ ok: true });
    expect(String(out.upload!.jarId)).toMatch(/_WordCount\.jar$/);
  });

  it('runs with jobId, claimMode and a full flinkConfiguration; the same run again returns the same jobid', () => {
    expect(out.run1).toMatchObject({ ok: true, jobid: jobId });
    expect(out.run2).toMatchObject({ ok: true, jobid: jobId });
  });

  it('sees the job in /v1/jobs/overview (tasks.total parses)', () => {
    expect(out.overview).toMatchObject({ ok: true, listed: true });
  });

  it('deletes the jar; a second delete fails with 400', () => {
    expect(out.delete1).toMatchObject({ ok: true });
    expect(out.delete2).toMatchObject({ ok: false, httpStatus: 400 });
  });

  it('never logs the credentials the operator sends inside flinkConfiguration', () => {
    const logs = JSON.stringify(gw.logs);
    expect(logs).not.toContain('compat-secret-123');
    expect(logs).not.toContain('compat-secret-456');
  });
});
