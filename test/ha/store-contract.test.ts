import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { ZooKeeperServer } from '../servers/zookeeper-server';
import type { KubernetesClient } from '../../src/ha/kubernetes-client';
import type { KubernetesHaSettings } from '../../src/ha/kubernetes-settings';
import {
  gatewayConfigMapName,
  KubernetesJobClaims,
  KubernetesRegistrationStore,
  kubernetesRecordPlace,
  labelsOf,
} from '../../src/ha/kubernetes-store';
import { RecordSeal } from '../../src/ha/record-seal';
import { RECORD_KIND, type RejectedRecord, type SharedJobClaims, type SharedRegistrationStore } from '../../src/ha/shared-store';
import { digestFromSecret, ZooKeeperSession } from '../../src/ha/zookeeper';
import { gatewayRoot, ZooKeeperJobClaims, ZooKeeperRegistrationStore } from '../../src/ha/zookeeper-store';
import type { StoredRegistration } from '../../src/submission/registration-store';
import { eventually } from '../helpers/eventually';
import { newJobId } from '../helpers/flink';
import { distributionHome } from '../helpers/flink-dist';
import { KubeApiServer } from '../servers/kube-apiserver';

const log = pino({ level: 'silent' });
const RETENTION_MS = 30 * 24 * 3600_000;
/** The replicas' gateway.ha.shared-secret. */
const SECRET = randomBytes(24).toString('base64');
const seal = new RecordSeal(SECRET);

/** One engine as the contract sees it: replicas of the store and claims, and raw access for planting records. */
interface Engine {
  store(onRejected?: RejectedRecord): Promise<SharedRegistrationStore & { stop?(): void }>;
  claims(wallClock?: () => number): SharedJobClaims;
  /** Writes a registration's raw data as someone other than a gateway would (any text). */
  writeRaw(jobId: string, text: string): Promise<void>;
  /** The place a registration for the job id is sealed for (its node path, its ConfigMap and key). */
  placeOf(jobId: string): string;
  /** Whether a claim for the job id is stored. */
  hasClaim(jobId: string): Promise<boolean>;
  close(): Promise<void>;
}

async function zookeeperEngine(): Promise<Engine> {
  const zk = await ZooKeeperServer.start({ home: distributionHome('2.1.3'), log });
  const namespace = `/flink/contract-${randomBytes(4).toString('hex')}`;
  const sessions: ZooKeeperSession[] = [];
  const session = async () => {
    const s = new ZooKeeperSession({ quorum: zk.connectString, namespace, sessionTimeoutMs: 6000, connectionTimeoutMs: 5000 }, log, {
      digest: digestFromSecret(SECRET),
    });
    await s.start();
    sessions.push(s);
    return s;
  };
  const admin = await session();
  await admin.mkdirp(`${gatewayRoot(namespace)}/claims`);
  return {
    async store(onRejected) {
      const store = new ZooKeeperRegistrationStore(await session(), log, { seal, ...(onRejected ? { onRejected } : {}) });
      await store.init();
      return store;
    },
    claims: (wallClock) => new ZooKeeperJobClaims(admin, { retentionMs: RETENTION_MS, seal, log, ...(wallClock ? { wallClock } : {}) }),
    placeOf: (jobId) => `${gatewayRoot(namespace)}/registrations/${jobId}`,
    async writeRaw(jobId, text) {
      const path = `${gatewayRoot(namespace)}/registrations/${jobId}`;
      await admin.mkdirp(`${gatewayRoot(namespace)}/registrations`);
      await admin.create(path, Buffer.from(text)).catch(() => admin.setData(path, Buffer.from(text)));
    },
    hasClaim: async (jobId) => (await admin.getData(`${gatewayRoot(namespace)}/claims/${jobId}`)) !== undefined,
    async close() {
      for (const s of sessions) s.close();
      await zk.stop();
    },
  };
}

async function kubernetesEngine(): Promise<Engine> {
  const kube = await KubeApiServer.start({ users: [{ name: 'gateway' }] });
  const namespace = 'flink-contract';
  await kube.createNamespace(namespace);
  // The gateway's minimum, exactly: the contract runs with it.
  await kube.grantConfigMaps(namespace, 'gateway', ['get', 'list', 'watch', 'create', 'update', 'delete']);
  const settings: KubernetesHaSettings = {
    clusterId: `contract-${randomBytes(3).toString('hex')}`,
    namespace,
    leaseDurationMs: 15_000,
    renewDeadlineMs: 15_000,
    retryPeriodMs: 5_000,
  };
  const clients: KubernetesClient[] = [];
  const stores: KubernetesRegistrationStore[] = [];
  const client = () => {
    const c = kube.client('gateway');
    clients.push(c);
    return c;
  };
  const admin = kube.client('admin');
  return {
    async store(onRejected) {
      const store = new KubernetesRegistrationStore(client(), settings, log, { sealer: seal, ...(onRejected ? { onRejected } : {}) });
      stores.push(store);
      await store.init();
      return store;
    },
    claims: (wallClock) =>
      new KubernetesJobClaims(client(), settings, { retentionMs: RETENTION_MS, sealer: seal, log, ...(wallClock ? { wallClock } : {}) }),
    async writeRaw(jobId, text) {
      const name = gatewayConfigMapName(settings.clusterId, 'registration', jobId);
      await admin.createConfigMap(namespace, {
        metadata: { name, labels: labelsOf(settings.clusterId, 'registration') },
        data: { registration: text },
      });
    },
    placeOf: (jobId) => kubernetesRecordPlace(namespace, gatewayConfigMapName(settings.clusterId, 'registration', jobId), 'registration'),
    hasClaim: async (jobId) =>
      (await admin.getConfigMap(namespace, gatewayConfigMapName(settings.clusterId, 'claim', jobId))) !== undefined,
    async close() {
      for (const s of stores) s.stop();
      for (const c of [...clients, admin]) await c.close();
      await kube.stop();
    },
  };
}

function registration(jobId: string, extra: Partial<StoredRegistration> = {}): StoredRegistration {
  return {
    jobId,
    principal: 'token:team-a',
    configuration: { 'parallelism.default': '1' },
    provenance: {},
    registeredAt: new Date().toISOString(),
    ...extra,
  };
}

/**
 * The shared store's contract (src/ha/shared-store.ts), the same cases on each engine the gateway
 * supports, each on its real server: ZooKeeper from Flink's distribution, a kube-apiserver on etcd
 * (the gateway's client there holds exactly the RBAC minimum the documentation names).
 */
describe.each([
  ['ZooKeeper', zookeeperEngine],
  ['Kubernetes', kubernetesEngine],
])('the shared registration store and job-id claims on %s', (_name, start) => {
  let engine: Engine;

  beforeAll(async () => {
    engine = await start();
  }, 180_000);

  afterAll(async () => {
    await engine?.close();
  });

  it('a put is read by another replica (added), then its update (updated) and its removal (removed)', async () => {
    const [a, b] = [await engine.store(), await engine.store()];
    const seen: string[] = [];
    b.on('added', (r) => seen.push(`added ${r.jobId} ${r.submitted === false ? 'submitting' : 'submitted'}`));
    b.on('updated', (r) => seen.push(`updated ${r.jobId} ${r.submitted === false ? 'submitting' : 'submitted'}`));
    b.on('removed', (jobId) => seen.push(`removed ${jobId}`));
    const jobId = newJobId();
    await a.put(registration(jobId, { submitted: false, attempt: 'a1' }));
    expect(a.get(jobId)).toMatchObject({ jobId, attempt: 'a1' });
    await eventually(() => b.get(jobId) !== undefined, 'the other replica to read the registration');
    await a.put(registration(jobId, { attempt: 'a1' }));
    await eventually(() => b.get(jobId)?.submitted === undefined, 'the other replica to read the update');
    await a.remove(jobId);
    await eventually(() => b.get(jobId) === undefined, 'the other replica to read the removal');
    expect(seen).toEqual([`added ${jobId} submitting`, `updated ${jobId} submitted`, `removed ${jobId}`]);
    expect(b.list().map((r) => r.jobId)).not.toContain(jobId);
  }, 60_000);

  it("a rolled-back attempt removes only its own record, never a retry's that another replica stored meanwhile", async () => {
    const [a, b] = [await engine.store(), await engine.store()];
    const jobId = newJobId();
    await a.put(registration(jobId, { submitted: false, attempt: 'first' }));
    await b.put(registration(jobId, { submitted: false, attempt: 'retry' }));
    await a.remove(jobId, 'first');
    const c = await engine.store();
    expect(c.get(jobId)).toMatchObject({ attempt: 'retry' });
    await b.remove(jobId, 'retry');
    const d = await engine.store();
    expect(d.get(jobId)).toBeUndefined();
  }, 60_000);

  it('a new replica lists what is stored; a record that does not verify, or is not a registration of its job, is ignored and counted; the others are read', async () => {
    const a = await engine.store();
    const good = newJobId();
    const [unsealed, forged, moved, garbled, misnamed] = [newJobId(), newJobId(), newJobId(), newJobId(), newJobId()];
    await a.put(registration(good));
    const body = (jobId: string) => JSON.stringify(registration(jobId));
    await engine.writeRaw(unsealed, body(unsealed));
    await engine.writeRaw(
      forged,
      new RecordSeal('not-the-replicas-secret-at-all').seal(RECORD_KIND.registration, engine.placeOf(forged), body(forged)),
    );
    // A valid record of another job, copied to this job's place.
    await engine.writeRaw(moved, seal.seal(RECORD_KIND.registration, engine.placeOf(good), body(moved)));
    await engine.writeRaw(garbled, '{"jobId": "not this one"');
    // Sealed by a replica for this very place, but naming another job.
    await engine.writeRaw(misnamed, seal.seal(RECORD_KIND.registration, engine.placeOf(misnamed), body(good)));
    const rejected: string[] = [];
    const b = await engine.store((kind, reason) => rejected.push(`${kind} ${reason}`));
    expect(b.get(good)).toMatchObject({ jobId: good, principal: 'token:team-a' });
    expect([unsealed, forged, moved, garbled, misnamed].map((j) => b.get(j))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    // Each counted once, with why (the metric's reason label): the earlier cases left only good records.
    expect(rejected.sort()).toEqual([
      'registration bad-mac', // forged
      'registration bad-mac', // moved
      'registration malformed', // misnamed
      'registration unsealed', // unsealed
      'registration unsealed', // garbled
    ]);
  }, 60_000);

  it('a claim is new once; the same request again is a retry and anything else a conflict, on any replica; a release frees it', async () => {
    const [a, b] = [engine.claims(), engine.claims()];
    const jobId = newJobId();
    expect(await a.claim(jobId, 'token:team-a', 'f1')).toBe('new');
    expect(await b.claim(jobId, 'token:team-a', 'f1')).toBe('retry');
    expect(await b.claim(jobId, 'token:team-b', 'f1')).toBe('conflict');
    expect(await a.claim(jobId, 'token:team-a', 'f2')).toBe('conflict');
    await b.release(jobId);
    expect(await engine.hasClaim(jobId)).toBe(false);
    expect(await a.claim(jobId, 'token:team-b', 'f3')).toBe('new');
  }, 60_000);

  it('two replicas claiming one id at once: exactly one gets it', async () => {
    const jobId = newJobId();
    const results = await Promise.all([
      engine.claims().claim(jobId, 'token:a', 'x'),
      engine.claims().claim(jobId, 'token:b', 'y'),
      engine.claims().claim(jobId, 'token:c', 'z'),
    ]);
    expect(results.filter((r) => r === 'new')).toHaveLength(1);
    expect(results.filter((r) => r === 'conflict')).toHaveLength(2);
  }, 60_000);

  it('an expired claim is replaced by a new run; prune removes the expired claims and keeps the others', async () => {
    const past = () => Date.now() - RETENTION_MS - 60_000;
    const old = newJobId();
    const stale = newJobId();
    const fresh = newJobId();
    expect(await engine.claims(past).claim(old, 'token:a', 'x')).toBe('new');
    expect(await engine.claims(past).claim(stale, 'token:a', 'x')).toBe('new');
    expect(await engine.claims().claim(fresh, 'token:a', 'x')).toBe('new');
    expect(await engine.claims().claim(old, 'token:b', 'y')).toBe('new');
    expect(await engine.claims().prune()).toBe(1);
    expect([await engine.hasClaim(old), await engine.hasClaim(stale), await engine.hasClaim(fresh)]).toEqual([true, false, true]);
  }, 60_000);
});
