import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinTokenProviders } from '../../fs-plugins';
import { identityFromConfig } from '../../src/ha/flink-leader';
import { KUBERNETES_HA_FACTORY } from '../../src/ha/ha-options';
import type { KubernetesClient } from '../../src/ha/kubernetes-client';
import { REQUIRED_CONFIGMAP_VERBS } from '../../src/ha/kubernetes-session';
import { clusterConfigMapName } from '../../src/ha/kubernetes-settings';
import { gatewayConfigMapName, kubernetesRecordPlace, labelsOf } from '../../src/ha/kubernetes-store';
import { RecordSeal } from '../../src/ha/record-seal';
import { RECORD_KIND } from '../../src/ha/shared-store';
import { eventually } from '../helpers/eventually';
import { json, newJobId, uploadFile } from '../helpers/flink';
import { TEST_JOB_JAR } from '../helpers/flink-dist';
import { composeGateway, flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { KubeApiServer } from '../servers/kube-apiserver';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NAMESPACE = 'flink-team-a';
/** The replicas' gateway.ha.shared-secret: every record in the ConfigMaps is sealed under it. */
const SECRET = randomBytes(24).toString('base64');
const seal = new RecordSeal(SECRET);

/**
 * Flink's leader ConfigMap as a JobManager of Flink's Kubernetes HA writes it (the election played
 * by the test): fabric8's lock annotation, and the leader keys `<sessionId>,<address>`.
 */
async function setLeader(admin: KubernetesClient, clusterId: string, dispatcher: string): Promise<void> {
  const name = clusterConfigMapName(clusterId);
  const sessionId = randomUUID();
  const now = new Date().toISOString();
  const cm = {
    metadata: {
      name,
      labels: { app: clusterId, type: 'flink-native-kubernetes', 'configmap-type': 'high-availability' },
      annotations: {
        'control-plane.alpha.kubernetes.io/leader': JSON.stringify({
          holderIdentity: randomUUID(),
          leaseDuration: 'PT6S',
          acquireTime: now,
          renewTime: now,
          leaderTransitions: 0,
        }),
      },
    },
    data: {
      'org.apache.flink.k8s.leader.dispatcher': `${sessionId},${dispatcher}`,
      'org.apache.flink.k8s.leader.resourcemanager': `${sessionId},${dispatcher.replace('dispatcher_1', 'resourcemanager_0')}`,
      'org.apache.flink.k8s.leader.restserver': `${sessionId},http://127.0.0.1:8081`,
    },
  };
  const current = await admin.getConfigMap(NAMESPACE, name);
  if (current)
    await admin.replaceConfigMap(NAMESPACE, { ...cm, metadata: { ...cm.metadata, resourceVersion: current.metadata.resourceVersion! } });
  else await admin.createConfigMap(NAMESPACE, cm);
}

/** The cluster's Flink configuration for Kubernetes HA, as the operator writes it into the JobManager's ConfigMap (short lease, as in the failover test). */
function writeHaConf(dir: string, kubeconfig: string, clusterId: string, type = 'kubernetes'): string {
  const file = join(dir, `config-${clusterId}.yaml`);
  writeFileSync(
    file,
    [
      `high-availability.type: ${type}`,
      `high-availability.storageDir: file://${dir}/ha`,
      `kubernetes.cluster-id: ${clusterId}`,
      `kubernetes.namespace: ${NAMESPACE}`,
      `kubernetes.config.file: ${kubeconfig}`,
      'high-availability.kubernetes.leader-election.lease-duration: 6 s',
      'high-availability.kubernetes.leader-election.renew-deadline: 4 s',
      'high-availability.kubernetes.leader-election.retry-period: 1 s',
      '',
    ].join('\n'),
  );
  return file;
}

/**
 * A live gateway on Kubernetes HA against a real kube-apiserver, as the RBAC user with exactly the
 * ConfigMap verbs the gateway documents; the leader election played by the test in Flink's own
 * ConfigMap format (the JobManager is the suites' embedded Flink). It obtains tokens exactly while
 * the leader record names its JobManager; as a standby it stores runs for the leader; an API server
 * it cannot reach is 503 with Retry-After, nothing runs, and it steps down; back, it leads again.
 */
describe("a gateway on Kubernetes HA follows Flink's leader ConfigMap (a real kube-apiserver)", () => {
  let dir: string;
  let kube: KubeApiServer;
  let admin: KubernetesClient;
  let gw: TestGateway;
  let tokenServer: Server;
  let requests = 0;
  let self: string;
  let jarId: string;
  const clusterId = `gw-follow-${randomBytes(3).toString('hex')}`;
  const running: string[] = [];

  const lines = (prefix: string) => gw.logs.filter((l) => String(l.msg).startsWith(prefix)).length;
  const registrationMap = (jobId: string) => admin.getConfigMap(NAMESPACE, gatewayConfigMapName(clusterId, 'registration', jobId));
  /** A stored registration as the gateways sealed it (undefined: none, or it does not open). */
  const registrationOf = async (jobId: string): Promise<Record<string, unknown> | undefined> => {
    const name = gatewayConfigMapName(clusterId, 'registration', jobId);
    const cm = await admin.getConfigMap(NAMESPACE, name);
    const opened = cm
      ? seal.openJson(RECORD_KIND.registration, kubernetesRecordPlace(NAMESPACE, name, 'registration'), cm.data?.registration ?? '')
      : undefined;
    return opened?.ok ? (opened.value as Record<string, unknown>) : undefined;
  };
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
    dir = mkdtempSync(join(tmpdir(), 'gw-k8s-ha-'));
    kube = await KubeApiServer.start({ users: [{ name: 'gateway' }] });
    await kube.createNamespace(NAMESPACE);
    await kube.grantConfigMaps(NAMESPACE, 'gateway', REQUIRED_CONFIGMAP_VERBS);
    admin = kube.client('admin');
    tokenServer = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        requests++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ access_token: `k8s-${requests}`, token_type: 'Bearer', expires_in: 3 }));
      });
    });
    await new Promise<void>((r) => tokenServer.listen(0, '127.0.0.1', () => r()));
    const id = identityFromConfig(
      (await json('GET', `${flinkUrl()}/v1/jobmanager/config`)).body as unknown as { key: string; value: string }[],
    )!;
    self = `pekko.tcp://flink@${id.host}:${id.port ?? 6123}/user/rpc/dispatcher_1`;
    await setLeader(admin, clusterId, 'pekko.tcp://flink@10.255.0.1:6123/user/rpc/dispatcher_1'); // another JobManager leads
    gw = await startGateway(
      flinkUrl(),
      {
        // The factory class spelling of the operator's documentation: auto must read it as Kubernetes HA.
        'gateway.cluster.flink-conf': writeHaConf(dir, kube.kubeconfig('gateway', NAMESPACE), clusterId, KUBERNETES_HA_FACTORY),
        'gateway.tokens.store-dir': join(dir, 'store'),
        'gateway.ha.shared-secret': SECRET,
        'gateway.tokens.unregistered-jobs': 'ignore',
        'gateway.tokens.watcher.interval': '200 ms',
        'security.delegation.tokens.reobtain.cooldown': '0 ms',
        'security.delegation.token.provider.oauth2.token-endpoint': `http://127.0.0.1:${(tokenServer.address() as AddressInfo).port}/token`,
        'security.delegation.token.provider.oauth2.client-id': 'k8s',
        'security.delegation.token.provider.oauth2.client-secret': 'k8s-secret',
      },
      [],
      { providers: builtinTokenProviders.map((p) => p.create()) },
    );
    const up = await uploadFile(gw.url, TEST_JOB_JAR, 'GatewayTestJob.jar');
    jarId = String(up.body.filename).split('/').pop()!;
  }, 240_000);

  afterAll(async () => {
    for (const jobId of running) await json('PATCH', `${flinkUrl()}/v1/jobs/${jobId}?mode=cancel`).catch(() => undefined);
    if (jarId) await json('DELETE', `${flinkUrl()}/v1/jars/${jarId}`).catch(() => undefined);
    await gw?.close();
    await admin?.close();
    await kube?.stop();
    await new Promise<void>((r) => (tokenServer ? tokenServer.close(() => r()) : r()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('as a standby: a run is stored as a ConfigMap for the leader, nothing is obtained or kept here', async () => {
    expect(lines('leading:')).toBe(0);
    const jobId = await runProbe();
    await eventually(
      async () => (await registrationOf(jobId))?.submitted === undefined && (await registrationOf(jobId)) !== undefined,
      'the run to be marked submitted',
    );
    expect(await registrationOf(jobId)).toMatchObject({ jobId, principal: 'anonymous' });
    // Sealed: the ConfigMap holds the seal's wire form, not the bare record.
    expect(JSON.parse((await registrationMap(jobId))!.data!.registration!)).toMatchObject({ seal: 'hmac-sha256.v1', kind: 'registration' });
    expect(gw.gateway.tokens.status().registeredJobs).toEqual([]);
    await sleep(1500);
    expect(requests).toBe(0);
    expect((await json('GET', `${gw.url}/gateway/v1/tokens`)).body.ha).toMatchObject({
      leading: false,
      leader: 'pekko.tcp://flink@10.255.0.1:6123/user/rpc/dispatcher_1',
      store: expect.stringContaining(NAMESPACE),
    });
  }, 60_000);

  it("the gateway's ConfigMaps go away with the cluster and are never taken for Flink's HA metadata", async () => {
    const { items } = await admin.listConfigMaps(NAMESPACE, `app=${clusterId},type=flink-native-kubernetes`);
    const ours = items.filter((cm) => cm.metadata.name !== clusterConfigMapName(clusterId));
    expect(ours.length).toBeGreaterThanOrEqual(2); // the registration and the claim of the run above
    for (const cm of ours) {
      expect(cm.metadata.name).not.toMatch(/-config-map$|-jobmanager-leader$/);
      expect(Object.keys(cm.data ?? {}).filter((k) => /^(jobGraph-|executionPlan-)/.test(k))).toEqual([]);
      expect(cm.metadata.labels).toMatchObject({ app: clusterId, type: 'flink-native-kubernetes' });
    }
  }, 30_000);

  it('on leading: registers every stored running job and obtains; a run while leading obtains at once', async () => {
    const stored = running[0]!;
    // A claim past its retention (30 days), written as another replica would have: pruned on taking over.
    const expired = newJobId();
    const claimName = gatewayConfigMapName(clusterId, 'claim', expired);
    await admin.createConfigMap(NAMESPACE, {
      metadata: { name: claimName, labels: labelsOf(clusterId, 'claim') },
      data: {
        claim: seal.seal(
          RECORD_KIND.claim,
          kubernetesRecordPlace(NAMESPACE, claimName, 'claim'),
          JSON.stringify({ jobId: expired, principal: 'token:old', fingerprint: 'x', at: 0 }),
        ),
      },
    });
    await setLeader(admin, clusterId, self);
    await eventually(() => lines('leading:') > 0, 'the gateway to lead');
    await eventually(() => gw.gateway.tokens.status().registeredJobs.includes(stored), 'the stored job to be registered here');
    await eventually(() => requests > 0, 'a token to be obtained');
    const jobId = await runProbe();
    expect(gw.gateway.tokens.status().registeredJobs).toEqual(expect.arrayContaining([stored, jobId]));
    expect((await json('GET', `${gw.url}/gateway/v1/tokens`)).body.ha).toMatchObject({
      leading: true,
      leader: self,
      leadingSince: expect.any(String),
    });
    await eventually(
      async () => (await admin.getConfigMap(NAMESPACE, gatewayConfigMapName(clusterId, 'claim', expired))) === undefined,
      'the expired claim to be pruned',
    );
  }, 60_000);

  it('the API server out of reach: the gateway steps down after the renew deadline, a run is 503 with Retry-After and nothing runs; back, it leads again', async () => {
    const led = lines('leading:');
    await kube.stopApiServer();
    await eventually(() => lines('standby:') > 0, 'the gateway to step down without the API server', 30_000);
    expect(gw.gateway.tokens.status().registeredJobs).toEqual([]);
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
    expect((await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`)).status).toBe(404);
    await kube.startApiServer();
    await eventually(() => lines('leading:') > led, 'the gateway to lead again', 60_000);
    await eventually(() => gw.gateway.tokens.status().registeredJobs.length >= 2, 'the stored jobs to be registered again');
    await runProbe();
  }, 180_000);

  it('on losing the lead: stops obtaining and keeps nothing; the store keeps every registration', async () => {
    const before = lines('standby:');
    await setLeader(admin, clusterId, 'pekko.tcp://flink@10.255.0.2:6123/user/rpc/dispatcher_1');
    await eventually(() => lines('standby:') > before, 'the gateway to step down');
    expect(gw.gateway.tokens.status().registeredJobs).toEqual([]);
    const obtained = requests;
    await sleep(5000); // more than two renewals of 3-second tokens
    expect(requests).toBe(obtained);
    for (const jobId of running) expect(await registrationMap(jobId)).toBeDefined();
  }, 60_000);
});

/**
 * Least privilege: a gateway whose identity lacks a ConfigMap verb it needs does not start, and
 * says which verbs and what to grant, instead of failing request after request.
 */
describe('a gateway on Kubernetes HA without the ConfigMap verbs it needs (RBAC on a real kube-apiserver)', () => {
  let dir: string;
  let kube: KubeApiServer;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-k8s-rbac-'));
    kube = await KubeApiServer.start({ users: [{ name: 'no-delete' }, { name: 'nobody' }] });
    await kube.createNamespace(NAMESPACE);
    await kube.grantConfigMaps(NAMESPACE, 'no-delete', ['get', 'list', 'watch', 'create', 'update', 'patch']);
  }, 180_000);

  afterAll(async () => {
    await kube?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const start = (user: string) =>
    composeGateway(flinkUrl(), {
      'gateway.cluster.flink-conf': writeHaConf(dir, kube.kubeconfig(user, NAMESPACE), `rbac-${user}`),
      'gateway.tokens.store-dir': join(dir, `store-${user}`),
      'gateway.ha.shared-secret': SECRET,
    });

  it('without delete: start-up fails with GW_HA_STORE_FORBIDDEN naming the verb, the namespace and the Role rule', async () => {
    const err = (await start('no-delete').then(
      () => undefined,
      (e: unknown) => e,
    )) as { code?: string; message?: string } | undefined;
    expect(err?.code).toBe('GW_HA_STORE_FORBIDDEN');
    expect(err?.message).toMatch(/may not delete ConfigMaps in namespace flink-team-a/);
    expect(err?.message).toContain('verbs: [get, list, watch, create, update, delete]');
  }, 60_000);

  it('with no permission at all: every missing verb is named at once', async () => {
    const err = (await start('nobody').then(
      () => undefined,
      (e: unknown) => e,
    )) as { code?: string; message?: string } | undefined;
    expect(err?.code).toBe('GW_HA_STORE_FORBIDDEN');
    expect(err?.message).toMatch(/may not get, list, watch, create, update, delete ConfigMaps/);
  }, 60_000);
});
