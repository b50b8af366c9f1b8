import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { builtinTokenProviders } from '../../fs-plugins';
import { ZooKeeperServer } from '../servers/zookeeper-server';
import { identityFromConfig, leaderPath } from '../../src/ha/flink-leader';
import { RecordSeal } from '../../src/ha/record-seal';
import { digestFromSecret, OPEN_ACL, ZooKeeperSession } from '../../src/ha/zookeeper';
import { RECORD_KIND } from '../../src/ha/shared-store';
import { gatewayRoot, ZooKeeperRegistrationStore } from '../../src/ha/zookeeper-store';
import { json, newJobId, uploadFile } from '../helpers/flink';
import { distributionHome, TEST_JOB_JAR } from '../helpers/flink-dist';
import { eventually } from '../helpers/eventually';
import { leaderRecordBytes } from '../helpers/flink-ha-records';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';

const log = pino({ level: 'warn' });
/** The replicas' shared secret (gateway.ha.shared-secret). */
const SECRET = randomBytes(24).toString('base64');
const seal = new RecordSeal(SECRET);
/** A node's record as the gateways sealed it. */
const opened = (path: string, data: Buffer) => {
  const r = seal.openJson(path.includes('/claims/') ? RECORD_KIND.claim : RECORD_KIND.registration, path, data);
  if (!r.ok) throw new Error(`${path}: ${r.reason}`);
  return r.value as Record<string, unknown>;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A live gateway following a leader election that the test plays in a real ZooKeeper, writing
 * Flink's own record format (the JobManager is the suites' embedded Flink): the gateway obtains
 * tokens exactly while the record names its JobManager; as a standby it stores runs for the
 * leader and obtains nothing; on leading again it registers what was stored meanwhile.
 */
describe("a gateway follows Flink's leader record (ZooKeeper, the record played by the test)", () => {
  let dir: string;
  let zk: ZooKeeperServer;
  let session: ZooKeeperSession;
  let gw: TestGateway;
  let tokenServer: Server;
  let requests = 0;
  let self: string;
  let jarId: string;
  const namespace = `/flink/gw-follow-${randomBytes(4).toString('hex')}`;
  const running: string[] = [];

  const setLeader = async (address: string) => {
    const path = leaderPath({ namespace }, 'dispatcher');
    await session.mkdirp(path, OPEN_ACL);
    await session.setData(path, leaderRecordBytes(address));
  };
  const leading = () => gw.logs.some((l) => String(l.msg).startsWith('leading:'));
  const lines = (prefix: string) => gw.logs.filter((l) => String(l.msg).startsWith(prefix)).length;
  /** A run that stays RUNNING (its probe waits for a token it never gets) until cancelled. */
  const runProbe = async () => {
    const jobId = newJobId();
    const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      entryClass: 'dev.flinkjargateway.testjobs.TokenProbe',
      programArgsList: ['--provider', 'oauth2', '--expect', 'never-issued', '--timeout-ms', '120000'],
      flinkConfiguration: { 'parallelism.default': '1' },
    });
    expect(r.status).toBe(200);
    running.push(jobId);
    return jobId;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-ha-follow-'));
    zk = await ZooKeeperServer.start({ home: distributionHome('2.1.3'), log });
    // The test plays Flink (its leader records, open) and other replicas (with the gateways' identity).
    session = new ZooKeeperSession({ quorum: zk.connectString, namespace, sessionTimeoutMs: 4000, connectionTimeoutMs: 5000 }, log, {
      digest: digestFromSecret(SECRET),
    });
    await session.start();
    tokenServer = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        requests++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ access_token: `follow-${requests}`, token_type: 'Bearer', expires_in: 3 }));
      });
    });
    await new Promise<void>((r) => tokenServer.listen(0, '127.0.0.1', () => r()));
    // This JobManager as its leader record would name it.
    const config = (await json('GET', `${flinkUrl()}/v1/jobmanager/config`)).body as unknown as { key: string; value: string }[];
    const id = identityFromConfig(config)!;
    self = `pekko.tcp://flink@${id.host}:${id.port ?? 6123}/user/rpc/dispatcher_1`;
    // The cluster's Flink configuration, as a JobManager's ConfigMap would carry it.
    const [root, clusterId] = [namespace.split('/')[1]!, namespace.split('/')[2]!];
    writeFileSync(
      join(dir, 'config.yaml'),
      [
        `high-availability.type: zookeeper`,
        `high-availability.zookeeper.quorum: "${zk.connectString}"`,
        `high-availability.zookeeper.path.root: /${root}`,
        `high-availability.cluster-id: ${clusterId}`,
        'high-availability.zookeeper.client.session-timeout: 4000',
        'high-availability.zookeeper.client.connection-timeout: 3000',
        '',
      ].join('\n'),
    );
    await setLeader('pekko.tcp://flink@10.255.0.1:6123/user/rpc/dispatcher_1'); // another JobManager leads
    gw = await startGateway(
      flinkUrl(),
      {
        'gateway.cluster.flink-conf': join(dir, 'config.yaml'),
        'gateway.tokens.store-dir': join(dir, 'store'),
        'gateway.ha.shared-secret': SECRET,
        'gateway.tokens.unregistered-jobs': 'ignore',
        'gateway.tokens.watcher.interval': '200 ms',
        'security.delegation.tokens.reobtain.cooldown': '0 ms',
        'security.delegation.token.provider.oauth2.token-endpoint': `http://127.0.0.1:${(tokenServer.address() as AddressInfo).port}/token`,
        'security.delegation.token.provider.oauth2.client-id': 'follow',
        'security.delegation.token.provider.oauth2.client-secret': 'follow-secret',
      },
      [],
      { providers: builtinTokenProviders.map((p) => p.create()) },
    );
    const up = await uploadFile(gw.url, TEST_JOB_JAR, 'GatewayTestJob.jar');
    jarId = String(up.body.filename).split('/').pop()!;
  }, 180_000);

  afterAll(async () => {
    for (const jobId of running) await json('PATCH', `${flinkUrl()}/v1/jobs/${jobId}?mode=cancel`).catch(() => undefined);
    if (jarId) await json('DELETE', `${flinkUrl()}/v1/jars/${jarId}`).catch(() => undefined);
    await gw?.close();
    session?.close();
    await zk?.stop();
    await new Promise<void>((r) => (tokenServer ? tokenServer.close(() => r()) : r()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('as a standby: a run is stored in ZooKeeper for the leader, nothing is obtained or kept here', async () => {
    expect(leading()).toBe(false);
    const jobId = await runProbe();
    const path = `${gatewayRoot(namespace)}/registrations/${jobId}`;
    expect(opened(path, (await session.getData(path))!.data)).toMatchObject({ jobId, principal: 'anonymous' });
    await eventually(async () => !('submitted' in opened(path, (await session.getData(path))!.data)), 'the run to be marked submitted');
    expect(gw.gateway.tokens.status().registeredJobs).toEqual([]);
    await sleep(1500);
    expect(requests).toBe(0);
    expect((await json('GET', `${gw.url}/gateway/v1/tokens`)).body.ha).toMatchObject({
      leading: false,
      leader: 'pekko.tcp://flink@10.255.0.1:6123/user/rpc/dispatcher_1',
      store: expect.stringContaining(namespace),
    });
  }, 60_000);

  it('on leading: registers every stored running job and obtains; a run while leading obtains at once', async () => {
    const stored = running[0]!;
    // A claim past its retention (30 days): the leader's gateway prunes it on taking over.
    const expired = newJobId();
    const expiredPath = `${gatewayRoot(namespace)}/claims/${expired}`;
    await session.create(
      expiredPath,
      seal.sealBytes(RECORD_KIND.claim, expiredPath, JSON.stringify({ jobId: expired, principal: 'token:old', fingerprint: 'x', at: 0 })),
    );
    await setLeader(self);
    await eventually(() => leading(), 'the gateway to lead');
    await eventually(() => gw.gateway.tokens.status().registeredJobs.includes(stored), 'the stored job to be registered here');
    await eventually(() => requests > 0, 'a token to be obtained');
    const jobId = await runProbe();
    expect(gw.gateway.tokens.status().registeredJobs).toEqual(expect.arrayContaining([stored, jobId]));
    expect((await json('GET', `${gw.url}/gateway/v1/tokens`)).body.ha).toMatchObject({
      leading: true,
      leader: self,
      jobManager: expect.any(Object),
      leadingSince: expect.any(String),
    });
    await eventually(
      async () => !(await session.getChildren(`${gatewayRoot(namespace)}/claims`)).includes(expired),
      'the expired claim to be pruned',
    );
  }, 60_000);

  it('while leading: a registration planted without the record key is never registered (logged, counted); a sealed one is (control)', async () => {
    const dirPath = `${gatewayRoot(namespace)}/registrations`;
    const [forged, moved, sealed] = [newJobId(), newJobId(), newJobId()];
    const rec = (jobId: string) =>
      JSON.stringify({ jobId, principal: 'admin', configuration: {}, provenance: {}, registeredAt: new Date().toISOString() });
    // Written with the gateways' ZooKeeper identity (the ACL admits it), as an attacker holding
    // only ZooKeeper access to the subtree, or a replica with another secret, would.
    await session.create(
      `${dirPath}/${forged}`,
      new RecordSeal('not-the-replicas-secret-at-all').sealBytes(RECORD_KIND.registration, `${dirPath}/${forged}`, rec(forged)),
    );
    // A valid record of one job copied onto another job's node.
    await session.create(`${dirPath}/${moved}`, seal.sealBytes(RECORD_KIND.registration, `${dirPath}/${sealed}`, rec(moved)));
    await session.create(`${dirPath}/${sealed}`, seal.sealBytes(RECORD_KIND.registration, `${dirPath}/${sealed}`, rec(sealed)));
    await eventually(() => gw.gateway.tokens.status().registeredJobs.includes(sealed), 'the sealed registration to be registered');
    const metrics = async () => (await fetch(`${gw.url}/gateway/v1/metrics`)).text();
    await eventually(
      async () => /flink_gateway_ha_records_rejected_total\{kind="registration",reason="bad-mac"\} 2/.test(await metrics()),
      'both forged records to be counted',
    );
    expect(gw.gateway.tokens.status().registeredJobs).not.toContain(forged);
    expect(gw.gateway.tokens.status().registeredJobs).not.toContain(moved);
    const errors = gw.logs.filter(
      (l) => l.level === 50 && String(l.msg).startsWith('a shared job registration failed its integrity check'),
    );
    expect(errors.map((l) => l.jobId).sort()).toEqual([forged, moved].sort());
    expect(JSON.stringify(gw.logs)).not.toContain(SECRET);
    for (const jobId of [forged, moved, sealed]) await session.remove(`${dirPath}/${jobId}`);
    await eventually(() => !gw.gateway.tokens.status().registeredJobs.includes(sealed), 'the removed registration to be dropped');
  }, 60_000);

  it('on losing the lead: stops obtaining and keeps nothing; the store keeps every registration', async () => {
    await setLeader('pekko.tcp://flink@10.255.0.2:6123/user/rpc/dispatcher_1');
    await eventually(() => lines('standby:') > 0, 'the gateway to step down');
    expect(gw.gateway.tokens.status().registeredJobs).toEqual([]);
    const before = requests;
    await sleep(5000); // more than two renewals of 3-second tokens
    expect(requests).toBe(before);
    const children = await session.getChildren(`${gatewayRoot(namespace)}/registrations`);
    expect(children.sort()).toEqual([...running].sort());
  }, 60_000);

  it("a rolled-back attempt removes only its own record, never a retry's that another replica stored meanwhile", async () => {
    const [a, b] = [new ZooKeeperRegistrationStore(session, log, { seal }), new ZooKeeperRegistrationStore(session, log, { seal })];
    await Promise.all([a.init(), b.init()]);
    const jobId = newJobId();
    const rec = { jobId, configuration: {}, provenance: {}, registeredAt: new Date().toISOString(), submitted: false };
    await a.put({ ...rec, attempt: 'first' });
    await b.put({ ...rec, attempt: 'retry' });
    await a.remove(jobId, 'first');
    const path = `${gatewayRoot(namespace)}/registrations/${jobId}`;
    expect(opened(path, (await session.getData(path))!.data)).toMatchObject({ attempt: 'retry' });
    await b.remove(jobId, 'retry');
    expect(await session.getData(`${gatewayRoot(namespace)}/registrations/${jobId}`)).toBeUndefined();
  }, 30_000);

  it('a job id claimed through this gateway is a conflict for another principal or request, whichever replica asks', async () => {
    const claims = await session.getChildren(`${gatewayRoot(namespace)}/claims`);
    expect(claims).toEqual(expect.arrayContaining(running));
    const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId: running[0],
      entryClass: 'dev.flinkjargateway.testjobs.TokenProbe',
      programArgsList: ['--provider', 'other'],
    });
    expect(r.status).toBe(409);
  }, 30_000);
});
