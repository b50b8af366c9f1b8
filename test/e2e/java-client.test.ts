import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { newJobId, WORDCOUNT_JAR } from '../helpers/flink';
import { runProcess } from '../helpers/run-process';

const root = projectRoot(__dirname);
const moduleDir = join(root, 'test', 'java-client');

interface Step {
  ok: boolean;
  jobid?: string;
  error?: string;
  httpStatus?: number;
  listed?: boolean;
}

/** Builds the compat program against one Flink line (cached by Maven's own up-to-date checks). */
function build(line: '2.1' | '1.20'): string {
  const dir = join(moduleDir, 'target', `flink-${line}`);
  if (!existsSync(join(dir, 'compat.jar'))) {
    execFileSync('mvn', ['-q', '-B', '-f', join(moduleDir, 'pom.xml'), `-Pflink-${line}`, 'package'], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return dir;
}

/**
 * Flink's own Java client (RestClient / RestClusterClient and flink-runtime-web's message headers)
 * replays the Flink Kubernetes Operator's exact submission sequence against the gateway.
 */
describe.each(['2.1', '1.20'] as const)("the operator's sequence with Flink %s client classes", (line) => {
  let gw: TestGateway;
  let out: Record<string, Step & Record<string, unknown>>;
  const jobId = newJobId();

  beforeAll(async () => {
    const dir = build(line);
    gw = await startGateway(flinkUrl());
    const r = await runProcess('java', ['-cp', `${dir}/compat.jar:${dir}/lib/*`, 'dev.flinkjargateway.compat.OperatorSequence', '--url', gw.url, '--jar', WORDCOUNT_JAR, '--job-id', jobId], {
      timeoutMs: 300_000,
    });
    if (r.status !== 0) throw new Error(`compat program exited ${r.status}: ${r.stderr}`);
    out = JSON.parse(r.stdout) as typeof out;
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
