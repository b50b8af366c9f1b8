import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { newJobId, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { runProcess } from '../helpers/run-process';

/** The README's curl walk-through, executed as written (only the example job id is made unique). */
describe('README curl examples', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway(flinkUrl());
  });
  afterAll(async () => gw.close());

  it('run unchanged against the gateway and the embedded cluster', async () => {
    const readme = readFileSync(join(projectRoot(__dirname), 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/<!-- readme-test -->\n```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThan(0);
    const jobId = newJobId();
    for (const block of blocks) {
      const script = `set -euo pipefail\n${block.replaceAll('0123456789abcdef0123456789abcdef', jobId)}`;
      const r = await runProcess('bash', ['-c', script], { env: { ...process.env, GATEWAY: gw.url, JAR: WORDCOUNT_JAR }, timeoutMs: 120_000 });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/uploaded [0-9a-f-]{36}_WordCount\.jar/);
      expect(r.stdout).toContain(`{"jobid":"${jobId}"}`);
      expect(r.stdout).not.toContain('"errors"');
    }
    await waitForJobState(gw.url, jobId, ['FINISHED']);
  });
});
