import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpPlugin } from '../../fs-plugins/http';
import { projectRoot } from '../../src/project-root';
import { newJobId, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { runProcess } from '../helpers/run-process';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';
import { makeSelfSignedCert } from '../servers/tls';

/** The README's curl walk-throughs, executed as written (only the example job ids are made unique). */
describe('README curl examples', () => {
  let gw: TestGateway;
  let origin: HttpOrigin;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-readme-'));
    const tls = makeSelfSignedCert();
    writeFileSync(join(dir, 'ca.pem'), tls.cert);
    writeFileSync(join(dir, 'words.txt'), 'to be or not to be\n');
    origin = await startHttpOrigin({ tls, files: { '/releases/wordcount.jar': readFileSync(WORDCOUNT_JAR) } });
    gw = await startGateway(
      flinkUrl(),
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
        'gateway.artifacts.ca-bundle': join(dir, 'ca.pem'),
      },
      [httpPlugin],
    );
  });
  afterAll(async () => {
    await gw.close();
    await origin.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('run unchanged against the gateway and the embedded cluster', async () => {
    const readme = readFileSync(join(projectRoot(__dirname), 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/<!-- readme-test -->\n```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(blocks).toHaveLength(3);
    const ids = {
      '0123456789abcdef0123456789abcdef': newJobId(),
      fedcba9876543210fedcba9876543210: newJobId(),
      '00112233445566778899aabbccddeeff': newJobId(),
    };
    const env = {
      ...process.env,
      GATEWAY: gw.url,
      JAR: WORDCOUNT_JAR,
      JAR_URL: `${origin.url}/releases/wordcount.jar`,
      INPUT_DIR: join(dir, 'words.txt'),
      PLACEHOLDER_JAR: join(dir, 'empty.jar'),
    };
    writeFileSync(join(dir, 'empty.jar'), buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' }));
    const outputs: string[] = [];
    for (const block of blocks) {
      let script = block;
      for (const [example, unique] of Object.entries(ids)) script = script.replaceAll(example, unique);
      const r = await runProcess('bash', ['-c', `set -euo pipefail\n${script}`], { env, timeoutMs: 120_000 });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).not.toContain('"errors"');
      outputs.push(r.stdout);
    }
    expect(outputs[0]).toMatch(/uploaded [0-9a-f-]{36}_WordCount\.jar/);
    expect(outputs[0]).toContain(`{"jobid":"${ids['0123456789abcdef0123456789abcdef']}"}`);
    expect(outputs[1]).toMatch(/fetched [0-9a-f-]{36}_wordcount\.jar/);
    expect(outputs[1]).toContain('"phase":"done"');
    expect(outputs[1]).toContain(`{"jobid":"${ids.fedcba9876543210fedcba9876543210}"}`);
    expect(outputs[1]).toContain('cancel: 202');
    expect(outputs[2]).toContain(`{"jobid":"${ids['00112233445566778899aabbccddeeff']}"}`);
    await waitForJobState(gw.url, ids['0123456789abcdef0123456789abcdef'], ['FINISHED']);
    await waitForJobState(gw.url, ids.fedcba9876543210fedcba9876543210, ['CANCELED']);
    await waitForJobState(gw.url, ids['00112233445566778899aabbccddeeff'], ['FINISHED']);
  });
});
