import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { freePort } from '../../src/cluster/process-group';
import { ZooKeeperServer } from '../servers/zookeeper-server';
import { identityFromConfig, leaderPath } from '../../src/ha/flink-leader';
import { ZooKeeperSession } from '../../src/ha/zookeeper';
import { json, newJobId, uploadFile } from '../helpers/flink';
import { distributionHome, TEST_JOB_JAR } from '../helpers/flink-dist';
import { eventually } from '../helpers/eventually';
import { leaderRecordBytes } from '../helpers/flink-ha-records';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';

const log = pino({ level: 'warn' });

/** The cluster's Flink configuration for ZooKeeper HA, as a deployment would write it. */
function writeHaConf(dir: string, quorum: string, clusterId: string, connectionTimeoutMs: number): string {
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    `high-availability.type: zookeeper\nhigh-availability.zookeeper.quorum: "${quorum}"\nhigh-availability.cluster-id: ${clusterId}\nhigh-availability.zookeeper.client.session-timeout: 4000\nhigh-availability.zookeeper.client.connection-timeout: ${connectionTimeoutMs}\n`,
  );
  return file;
}

/** A gateway on that configuration, and the test job's jar uploaded through it. */
async function gatewayWithJar(
  dir: string,
  flinkConf: string,
  options: Record<string, string>,
): Promise<{ gw: TestGateway; jarId: string }> {
  const gw = await startGateway(flinkUrl(), {
    'gateway.cluster.flink-conf': flinkConf,
    'gateway.tokens.store-dir': join(dir, 'store'),
    'gateway.ha.shared-secret': randomBytes(24).toString('base64'),
    ...options,
  });
  const jarId = String((await uploadFile(gw.url, TEST_JOB_JAR, 'GatewayTestJob.jar')).body.filename)
    .split('/')
    .pop()!;
  return { gw, jarId };
}

async function cleanUp(gw: TestGateway | undefined, jarId: string | undefined, dir: string | undefined): Promise<void> {
  if (jarId) await json('DELETE', `${flinkUrl()}/v1/jars/${jarId}`).catch(() => undefined);
  await gw?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
}

/**
 * The cluster's ZooKeeper gone under a leading gateway (the leader record played by the test, the
 * JobManager the suites' embedded Flink). Besides the answer, this file ending at all is part of
 * the check: an operation the gateway gave up on must not stay queued or retried in the client
 * (it once kept the process alive, and would have written a claim after its run was refused).
 */
describe('ZooKeeper lost under a leading gateway', () => {
  let dir: string;
  let zk: ZooKeeperServer;
  let gw: TestGateway;
  let jarId: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-ha-zk-lost-'));
    zk = await ZooKeeperServer.start({ home: distributionHome('2.1.3'), log });
    const namespace = '/flink/gw-zk-lost';
    const session = new ZooKeeperSession({ quorum: zk.connectString, namespace, sessionTimeoutMs: 4000, connectionTimeoutMs: 3000 }, log);
    await session.start();
    const id = identityFromConfig(
      (await json('GET', `${flinkUrl()}/v1/jobmanager/config`)).body as unknown as { key: string; value: string }[],
    )!;
    const path = leaderPath({ namespace }, 'dispatcher');
    await session.mkdirp(path);
    await session.setData(path, leaderRecordBytes(`pekko.tcp://flink@${id.host}:${id.port ?? 6123}/user/rpc/dispatcher_1`));
    session.close();
    ({ gw, jarId } = await gatewayWithJar(dir, writeHaConf(dir, zk.connectString, 'gw-zk-lost', 3000), {
      'gateway.tokens.unregistered-jobs': 'ignore',
    }));
  }, 120_000);

  afterAll(async () => {
    await cleanUp(gw, jarId, dir);
    await zk?.stop();
  });

  it('the gateway steps down, and a run is 503 GW_HA_STORE_UNAVAILABLE with Retry-After at once; nothing runs', async () => {
    await eventually(() => gw.logs.some((l) => String(l.msg).startsWith('leading:')), 'the gateway to lead');
    await zk.stop();
    await eventually(() => gw.logs.some((l) => String(l.msg).startsWith('standby:')), 'the gateway to step down without its session');
    const jobId = newJobId();
    const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      entryClass: 'dev.flinkjargateway.testjobs.TokenProbe',
      programArgsList: ['--provider', 'oauth2'],
    });
    expect({ status: r.status, code: String((r.body.errors as string[])[0]).split(':')[0], retryAfter: r.headers['retry-after'] }).toEqual({
      status: 503,
      code: 'GW_HA_STORE_UNAVAILABLE',
      retryAfter: '5',
    });
    // Not queued for the connection timeout: a disconnected session refuses at once, so the reason
    // is never the timed-out call's (asserted on the answer, not on the time it took).
    expect(String((r.body.errors as string[])[0])).not.toMatch(/did not complete within/);
    expect((await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`)).status).toBe(404);
  }, 60_000);
});

/**
 * Tokens off: ZooKeeper holds only the job-id claims. A quorum that is not up yet when the gateway
 * starts (a pod restarted with its ZooKeeper) must not stop the gateway: runs answer 503 until it is.
 */
describe('ZooKeeper not reachable when a gateway without tokens starts', () => {
  let dir: string;
  let gw: TestGateway;
  let jarId: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-ha-zk-down-'));
    const port = await freePort(); // nothing listens there
    ({ gw, jarId } = await gatewayWithJar(dir, writeHaConf(dir, `127.0.0.1:${port}`, 'gw-zk-down', 1000), {
      'security.delegation.tokens.enabled': 'false',
    }));
  }, 120_000);

  afterAll(() => cleanUp(gw, jarId, dir));

  it('starts, says why, and answers a run 503 GW_HA_STORE_UNAVAILABLE; nothing runs', async () => {
    expect(gw.logs.some((l) => String(l.msg).startsWith('ZooKeeper is not reachable yet'))).toBe(true);
    const jobId = newJobId();
    const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      entryClass: 'dev.flinkjargateway.testjobs.TokenProbe',
      programArgsList: ['--provider', 'oauth2'],
    });
    expect({ status: r.status, code: String((r.body.errors as string[])[0]).split(':')[0] }).toEqual({
      status: 503,
      code: 'GW_HA_STORE_UNAVAILABLE',
    });
    expect((await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`)).status).toBe(404);
  }, 60_000);
});
