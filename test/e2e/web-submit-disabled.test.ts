import { readFileSync } from 'node:fs';
import pino from 'pino';
import { EmbeddedCluster } from '../../src/cluster/embedded-cluster';
import { projectRoot } from '../../src/project-root';
import { filesUnder, json, uploadBytes, WORDCOUNT_JAR } from '../helpers/flink';
import { startGateway, type TestGateway } from '../helpers/gateway';

/**
 * Fidelity item 4: in front of a real Flink with `web.submit.enable: false` (a second embedded
 * cluster, started with that key), every jar route says what happened — the JobManager has no jar
 * handlers — instead of "upload the jar first" (run) or a 502 (upload).
 */
describe('a JobManager with web.submit.enable: false', () => {
  let cluster: EmbeddedCluster;
  let gw: TestGateway;
  let linking: TestGateway;

  beforeAll(async () => {
    cluster = await EmbeddedCluster.start({
      rootDir: projectRoot(__dirname),
      jvmOptions: ['-Xmx384m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'],
      slots: 1,
      startupTimeoutMs: 180_000,
      log: pino({ level: 'silent' }),
      flinkConfig: { 'web.submit.enable': 'false' },
    });
    gw = await startGateway(cluster.restUrl, {});
    linking = await startGateway(cluster.restUrl, { 'web.upload.dir': cluster.uploadDir, 'gateway.artifacts.handoff': 'shared-dir' });
  }, 240_000);
  afterAll(async () => {
    await gw?.close();
    await linking?.close();
    await cluster?.stop();
  });

  it('answers 404 GW_CLUSTER_SUBMIT_DISABLED naming web.submit.enable on upload, list, plan, run and delete', async () => {
    const calls = [
      await uploadBytes(gw.url, [{ name: 'WordCount.jar', bytes: readFileSync(WORDCOUNT_JAR) }]),
      await json('GET', `${gw.url}/v1/jars`),
      await json('GET', `${gw.url}/v1/jars/abc_x.jar/plan`),
      await json('POST', `${gw.url}/v1/jars/abc_x.jar/run`, {}),
      await json('DELETE', `${gw.url}/v1/jars/abc_x.jar`),
    ];
    for (const r of calls) {
      expect({ status: r.status, error: String((r.body.errors as string[])[0]).slice(0, 60) }).toEqual({
        status: 404,
        error: expect.stringMatching(/^GW_CLUSTER_SUBMIT_DISABLED: /),
      });
      expect(String((r.body.errors as string[])[0])).toContain('web.submit.enable: false');
    }
    // A gateway that would link the jar into the JobManager's directory links nothing (ADR 0019).
    const linked = await uploadBytes(linking.url, [{ name: 'WordCount.jar', bytes: readFileSync(WORDCOUNT_JAR) }]);
    expect({ status: linked.status, error: String((linked.body.errors as string[])[0]).slice(0, 60) }).toEqual({
      status: 404,
      error: expect.stringMatching(/^GW_CLUSTER_SUBMIT_DISABLED: /),
    });
    expect(filesUnder(cluster.uploadDir).filter((f) => f.endsWith('.jar'))).toEqual([]);
    // Everything else still passes through.
    expect((await json('GET', `${gw.url}/v1/overview`)).status).toBe(200);
  });
});
