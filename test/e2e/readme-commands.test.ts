import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { distributionHome } from '../helpers/flink-dist';
import { startGatewayProcess } from '../helpers/gateway-process';
import { startOrigin } from '../helpers/origin';

/**
 * The README's `npm start` commands, run as the built CLI they launch (`npm start` = build + this;
 * the build itself runs first in `npm test`). Ports are made ephemeral and the example JobManager
 * host is replaced by a local stand-in; nothing else changes.
 */
describe('README start commands', () => {
  const readme = readFileSync(join(projectRoot(__dirname), 'README.md'), 'utf8');
  const starts = [...readme.matchAll(/^npm (?:ci && npm )?start(?: -- (.*))?$/gm)].map((m) => (m[1] ?? '').split(/\s+/).filter(Boolean));

  it('the README has the default start, the fronting start and the two distribution starts', () => {
    expect(starts).toEqual([
      [],
      ['-Dgateway.cluster.rest-url=http://jobmanager:8081'],
      ['-Dgateway.embedded.flink-version=2.3.0', '-Dgateway.embedded.task-managers=2'],
      ['-Dgateway.embedded.flink-home=/opt/flink'],
    ]);
  });

  /** The distribution's processes are the gateway's children's children: stop() must end them all. */
  async function distributionStart(args: string[], expected: { version: string; taskmanagers: number }): Promise<void> {
    const gw = await startGatewayProcess([...args, '-Drest.port=0', '-Dgateway.embedded.slots=1'], { timeoutMs: 300_000 });
    try {
      const overview = (await (await fetch(`${gw.url}/v1/overview`)).json()) as { taskmanagers: number; 'flink-version': string };
      expect({ version: overview['flink-version'], taskmanagers: overview.taskmanagers }).toEqual(expected);
      expect(await gw.stop()).toBe(0);
    } finally {
      gw.kill();
    }
  }

  it("`npm start -- -Dgateway.embedded.flink-version=2.3.0 ...` runs Flink 2.3.0's distribution with two TaskManagers", async () => {
    // Assembled by the test helper first (with the project venv's pip), so the start finds it cached.
    distributionHome('2.3.0');
    await distributionStart(starts[2]!, { version: '2.3.0', taskmanagers: 2 });
  }, 400_000);

  it('`npm start -- -Dgateway.embedded.flink-home=<dir>` runs the distribution in that directory', async () => {
    const home = distributionHome('1.20.5');
    await distributionStart(
      starts[3]!.map((a) => a.replace('/opt/flink', home)),
      { version: '1.20.5', taskmanagers: 1 },
    );
  }, 400_000);

  it('`npm start` launches the embedded Flink cluster and serves its REST API', async () => {
    const gw = await startGatewayProcess([...starts[0]!, '-Drest.port=0'], { timeoutMs: 180_000 });
    try {
      const overview = (await (await fetch(`${gw.url}/v1/overview`)).json()) as { 'slots-total': number; 'flink-version': string };
      expect(overview['slots-total']).toBeGreaterThanOrEqual(4);
      expect(overview['flink-version']).toMatch(/^2\.1\./);
      expect(await gw.stop()).toBe(0);
    } finally {
      gw.kill();
    }
  }, 200_000);

  it('`npm start -- -Dgateway.cluster.rest-url=...` fronts an existing JobManager', async () => {
    const jm = await startOrigin((req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ seen: req.url })),
    );
    const args = starts[1]!.map((a) => a.replace('http://jobmanager:8081', jm.url));
    const gw = await startGatewayProcess([...args, '-Drest.port=0']);
    try {
      expect(await (await fetch(`${gw.url}/v1/overview`)).json()).toEqual({ seen: '/v1/overview' });
      expect(await gw.stop()).toBe(0);
    } finally {
      gw.kill();
      await jm.close();
    }
  });
});
