import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { startOrigin } from '../helpers/origin';
import { startGatewayProcess } from '../helpers/gateway-process';
import { PROCESS_TIMEOUT_MS, runProcess } from '../helpers/run-process';

// Runs the built CLI (npm test builds dist/ first), as a user would.
const root = projectRoot(__dirname);
const bin = join(root, 'bin', 'flink-jar-gateway.js');
// Never reached: start-up must stop before contacting a cluster (port 9 is discard, and refused).
const noCluster = '-Dgateway.cluster.rest-url=http://127.0.0.1:9';

describe('third-party plugins on the command line', () => {
  it.each([
    ['bad-version', /plugin 'future-store' in \S+ declares contract version 2; this gateway supports 1$/],
    ['missing-entry', /plugin 'lost-store' in \S+: the entry 'dist\/index\.js' does not exist/],
    ['throwing-module', /plugin 'broken-store' in \S+: loading index\.js failed: broken-store: cannot find the native binding/],
  ])('a plugin that fails to load (%s) stops start-up with one line and exit code 2', async (name, message) => {
    const dir = join(root, 'test/fixtures/plugins-bad', name);
    const r = await runProcess(process.execPath, [bin, `-Dgateway.plugins.dir=${dir}`, noCluster, '-Drest.port=0'], {
      timeoutMs: PROCESS_TIMEOUT_MS,
    });
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^flink-jar-gateway: GW_PLUGIN_LOAD_FAILED: /);
    expect(lines[0]).toMatch(message);
    expect(r.stdout).not.toContain('GATEWAY_URL=');
  });

  it('reads gateway.plugins.dir from the environment too', async () => {
    const env = { ...process.env, FLINK_GATEWAY_GATEWAY_PLUGINS_DIR: join(root, 'test/fixtures/plugins-bad/bad-version') };
    const r = await runProcess(process.execPath, [bin, noCluster, '-Drest.port=0'], { env, timeoutMs: PROCESS_TIMEOUT_MS });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('declares contract version 2');
  });

  it('loads a good plugin directory: --help lists the plugin options', async () => {
    const r = await runProcess(process.execPath, [bin, `-Dgateway.plugins.dir=${join(root, 'test/fixtures/plugins')}`, '--help'], {
      timeoutMs: PROCESS_TIMEOUT_MS,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('fixture.root');
    expect(r.stdout).toContain('fixture.token');
  });

  it('without a plugins directory, --help lists only the built-in plugins', async () => {
    const r = await runProcess(process.execPath, [bin, '--help'], { timeoutMs: PROCESS_TIMEOUT_MS });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('gateway.artifacts.local-file.enabled');
    expect(r.stdout).not.toContain('fixture.root');
  });

  it('starts with a good plugin directory, its options validated with the rest of the configuration', async () => {
    const origin = await startOrigin((_req, res) => res.end('{}'));
    const args = [
      bin,
      `-Dgateway.plugins.dir=${join(root, 'test/fixtures/plugins')}`,
      `-Dgateway.cluster.rest-url=${origin.url}`,
      '-Drest.port=0',
      `-Dfixture.root=${root}`,
    ];
    const gw = await startGatewayProcess(args.slice(1));
    try {
      expect((await fetch(`${gw.url}/gateway/v1/health`)).status).toBe(200);
      expect(await gw.stop()).toBe(0);
    } finally {
      gw.kill();
      await origin.close();
    }
  });
});
