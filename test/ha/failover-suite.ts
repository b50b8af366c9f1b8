import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { EmbeddedCluster } from '../../src/cluster/embedded-cluster';
import { StandaloneCluster } from '../../src/cluster/standalone-cluster';
import { ZooKeeperServer } from '../servers/zookeeper-server';
import { decodeLeaderRecord, leaderPath } from '../../src/ha/flink-leader';
import type { KubernetesClient } from '../../src/ha/kubernetes-client';
import { leaderRecordOf } from '../../src/ha/kubernetes-leader';
import { clusterConfigMapName } from '../../src/ha/kubernetes-settings';
import { ZooKeeperSession } from '../../src/ha/zookeeper';
import { projectRoot } from '../../src/project-root';
import { json, newJobId, printFailure, uploadBytes, uploadFile, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';
import { eventually } from '../helpers/eventually';
import { buildJar } from '../helpers/jars';
import { distributionHome, TEST_JOB_JAR, TOKEN_BRIDGE_JAR } from '../helpers/flink-dist';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { writePaddedJar } from '../helpers/padded-jar';
import { type FaultProxy, onGet, startFaultProxy } from '../servers/fault-proxy';
import { type HttpOrigin, startHttpOrigin } from '../servers/http-origin';
import { KubeApiServer } from '../servers/kube-apiserver';

const VERSION = '2.1.3';
const ROUNDS = 5;
/** Tokens live 20 s: the probes read tokens the new leader's gateway obtained after the kill. */
const TOKEN_TTL_S = 20;
const CLUSTER_ID = 'gw-ha-test';
/** The replicas' shared secret, in a file as a Kubernetes Secret would mount it. */
const HA_SECRET = randomBytes(32).toString('base64');
const log = pino({ level: process.env.HA_TEST_LOG === '1' ? 'info' : 'warn' });
/** The operator's class-less placeholder jar. */
const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Client-credentials tokens `ha-e<epoch>-<n>`: the test moves the epoch at each kill, so a token names the side of the failover it was issued on. */
function startTokenEndpoint(): Promise<{
  server: Server;
  url: string;
  setEpoch: (e: number) => void;
  firstOfEpoch: Map<number, number>;
  clientsOfEpoch: Map<number, Set<string>>;
}> {
  let n = 0;
  let epoch = 0;
  const firstOfEpoch = new Map<number, number>();
  // Who asked, per epoch (each gateway has a client id of its own): exactly one gateway obtains at a time.
  const clientsOfEpoch = new Map<number, Set<string>>();
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => (body += d));
    req.on('end', () => {
      if (!firstOfEpoch.has(epoch)) firstOfEpoch.set(epoch, Date.now());
      const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      const client =
        new URLSearchParams(body).get('client_id') ??
        (basic ? decodeURIComponent(Buffer.from(basic, 'base64').toString('utf8').split(':')[0]!) : 'unknown');
      clientsOfEpoch.set(epoch, (clientsOfEpoch.get(epoch) ?? new Set()).add(client));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: `ha-e${epoch}-${++n}`, token_type: 'Bearer', expires_in: TOKEN_TTL_S }));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        server,
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`,
        setEpoch: (e) => (epoch = e),
        firstOfEpoch,
        clientsOfEpoch,
      }),
    ),
  );
}

/** Where the cluster's HA data lives, as the test starts it, and how the test reads who leads. */
export interface HaEngine {
  /** Flink's HA settings for the cluster (and so the gateways, which read the cluster's configuration). */
  flinkConfig: Record<string, string>;
  /** The REST URL Flink's leader record names now, if any. */
  leaderRestUrl(): Promise<string | undefined>;
  stop(): Promise<void>;
}

/** ZooKeeper from Flink's bin/zookeeper.sh. */
export async function zookeeperHa(home: string): Promise<HaEngine> {
  const zk = await ZooKeeperServer.start({ home, log });
  const watch = new ZooKeeperSession(
    { quorum: zk.connectString, namespace: `/flink/${CLUSTER_ID}`, sessionTimeoutMs: 4000, connectionTimeoutMs: 5000 },
    log,
  );
  await watch.start();
  return {
    flinkConfig: {
      'high-availability.type': 'zookeeper',
      'high-availability.zookeeper.quorum': zk.connectString,
      'high-availability.zookeeper.client.session-timeout': '4000',
      'high-availability.zookeeper.client.connection-timeout': '3000',
    },
    async leaderRestUrl() {
      const node = await watch.getData(leaderPath(watch.settings, 'rest_server')).catch(() => undefined);
      return node ? decodeLeaderRecord(node.data)?.address : undefined;
    },
    async stop() {
      watch.close();
      await zk.stop();
    },
  };
}

/**
 * A real kube-apiserver on etcd, Flink's own Kubernetes HA with the short lease of the reference
 * (6 s lease, 4 s renew deadline, 1 s retry period). The JobManagers and the gateways use one
 * identity, as a sidecar shares the JobManager pod's service account: Flink's ConfigMap verbs.
 */
export async function kubernetesHa(): Promise<HaEngine> {
  const kube = await KubeApiServer.start({ users: [{ name: 'flink' }] });
  const namespace = 'flink-ha';
  await kube.createNamespace(namespace);
  await kube.grantConfigMaps(namespace, 'flink', ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);
  const admin: KubernetesClient = kube.client('admin');
  return {
    flinkConfig: {
      'high-availability.type': 'kubernetes',
      'kubernetes.cluster-id': CLUSTER_ID,
      'kubernetes.namespace': namespace,
      'kubernetes.config.file': kube.kubeconfig('flink', namespace),
      'high-availability.kubernetes.leader-election.lease-duration': '6 s',
      'high-availability.kubernetes.leader-election.renew-deadline': '4 s',
      'high-availability.kubernetes.leader-election.retry-period': '1 s',
    },
    async leaderRestUrl() {
      return leaderRecordOf(await admin.getConfigMap(namespace, clusterConfigMapName(CLUSTER_ID)).catch(() => undefined), 'restserver')
        ?.address;
    },
    async stop() {
      await admin.close();
      await kube.stop();
    },
  };
}

/**
 * JobManager HA on Flink's own distribution, on one HA engine: ZooKeeper from Flink's
 * bin/zookeeper.sh, or a real kube-apiserver (Kubernetes HA, the operator's usual one); two
 * JobManagers and a TaskManager from Flink's scripts, the token bridge in lib/, and next to each
 * JobManager a gateway process whose bridge pulls from it. Each round kills -9 the leading
 * JobManager and its gateway while a job runs and while a run by URI is in flight; the run is
 * retried on the other gateway as the operator retries through its Service.
 * One test file per engine (failover-zookeeper, failover-kubernetes), so jest runs them in parallel workers.
 */
export function describeFailover(engineName: string, startEngine: (home: string) => Promise<HaEngine>): void {
  describe(`JobManager HA on Flink ${VERSION} (${engineName}): gateways follow Flink's leader and lose nothing on failover`, () => {
    let dir: string;
    let ha: HaEngine;
    let cluster: StandaloneCluster;
    let tokens: Awaited<ReturnType<typeof startTokenEndpoint>>;
    let origin: HttpOrigin;
    let originProxy: FaultProxy;
    const gateways: (GatewayProcess | undefined)[] = [undefined, undefined];
    const bridgeDir = (i: number) => join(dir, `bridge-${i}`);

    async function startGatewayFor(i: number): Promise<GatewayProcess> {
      const gw = await startGatewayProcess(
        [
          `-Dgateway.cluster.rest-url=${cluster.restUrls[i]}`,
          `-Dgateway.cluster.flink-conf=${cluster.confDir}`,
          '-Drest.port=0',
          '-Dweb.submit.jar-uri.enable=true',
          '-Dgateway.artifacts.handoff=upload',
          '-Dgateway.artifacts.allowed-schemes=http',
          '-Duser.artifacts.raw-http-enabled=true',
          `-Dgateway.artifacts.restricted-hosts.allowed=127.0.0.1:${originProxy.port}`,
          `-Dgateway.artifacts.cache-dir=${join(dir, `cache-${i}`)}`,
          `-Dgateway.tokens.store-dir=${join(dir, `store-${i}`)}`,
          `-Dgateway.ha.shared-secret-file=${join(dir, 'ha-secret')}`,
          `-Dgateway.tokens.bridge-secret-file=${join(bridgeDir(i), 'bridge-secret')}`,
          '-Dgateway.tokens.watcher.interval=200 ms',
          '-Dgateway.tokens.watcher.missing-grace=20 s',
          '-Dsecurity.delegation.tokens.reobtain.cooldown=0 ms',
          `-Dsecurity.delegation.token.provider.oauth2.token-endpoint=${tokens.url}`,
          `-Dsecurity.delegation.token.provider.oauth2.client-id=ha-gateway-${i}`,
          '-Dsecurity.delegation.token.provider.oauth2.client-secret=ha-client-secret',
          '-Dgateway.log.level=info',
        ],
        { timeoutMs: 180_000 },
      );
      writeFileSync(join(bridgeDir(i), 'url.tmp'), `${gw.url}\n`);
      renameSync(join(bridgeDir(i), 'url.tmp'), join(bridgeDir(i), 'url'));
      gateways[i] = gw;
      return gw;
    }

    /** Which JobManager leads, from Flink's own record (the REST leader's URL). */
    async function leaderIndex(timeoutMs = 180_000): Promise<number> {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const address = await ha.leaderRestUrl();
        const i = address ? cluster.restUrls.indexOf(address) : -1;
        if (i >= 0 && (await json('GET', `${cluster.restUrls[i]}/v1/overview`).catch(() => ({ status: 0 }))).status === 200) return i;
        await sleep(200);
      }
      throw new Error('no JobManager leads');
    }

    /** Retries a call through one gateway as Flink's RestClusterClient does: 503 and I/O errors only. */
    async function retrying(call: () => Promise<{ status: number; body: Record<string, unknown> }>, seen: number[], timeoutMs = 180_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = await call().catch(() => ({ status: 0, body: {} as Record<string, unknown> }));
        seen.push(r.status);
        if ((r.status !== 503 && r.status !== 0) || Date.now() > deadline) return r;
        await sleep(500);
      }
    }

    beforeAll(async () => {
      EmbeddedCluster.ensureBuilt(projectRoot(__dirname), log);
      const home = distributionHome(VERSION);
      dir = mkdtempSync(join(tmpdir(), 'gw-ha-'));
      for (const i of [0, 1]) mkdirSync(bridgeDir(i));
      writeFileSync(join(dir, 'ha-secret'), `${HA_SECRET}\n`, { mode: 0o600 });
      await writePaddedJar(WORDCOUNT_JAR, join(dir, 'padded.jar'), 8 * 1024 * 1024);
      tokens = await startTokenEndpoint();
      // A jar of its own per round: no gateway has it cached, so each run by URI is in flight when its gateway dies.
      const padded = readFileSync(join(dir, 'padded.jar'));
      origin = await startHttpOrigin({
        files: Object.fromEntries(Array.from({ length: ROUNDS }, (_, i) => [`/jobs/wordcount-${i + 1}.jar`, padded])),
      });
      originProxy = await startFaultProxy({ host: '127.0.0.1', port: origin.port });
      ha = await startEngine(home);
      cluster = await StandaloneCluster.start({
        home,
        jobManagers: 2,
        taskManagers: 1,
        slots: 4,
        jvmOptions: '-XX:+UseSerialGC -XX:TieredStopAtLevel=1',
        extraLibJars: [TOKEN_BRIDGE_JAR],
        flinkConfig: {
          ...ha.flinkConfig,
          'high-availability.storageDir': `file://${join(dir, 'ha-storage')}`,
          'high-availability.cluster-id': CLUSTER_ID,
          'restart-strategy.type': 'fixed-delay',
          'restart-strategy.fixed-delay.attempts': '100',
          'restart-strategy.fixed-delay.delay': '1 s',
          'security.delegation.token.provider.gateway.poll-interval': '500 ms',
          'security.delegation.tokens.renewal.retry.backoff': '1 s',
          'classloader.parent-first-patterns.additional': 'dev.flinkjargateway.tokens.',
        },
        // Each JobManager's token bridge pulls from the gateway next to it.
        jobManagerConfig: (i) => ({
          'security.delegation.token.provider.gateway.url-file': join(bridgeDir(i), 'url'),
          'security.delegation.token.provider.gateway.secret-file': join(bridgeDir(i), 'bridge-secret'),
        }),
        startupTimeoutMs: 180_000,
        log,
      });
      await Promise.all([startGatewayFor(0), startGatewayFor(1)]);
    }, 900_000);

    afterAll(async () => {
      for (const gw of gateways) gw?.kill();
      await cluster?.stop();
      await ha?.stop();
      await Promise.all([originProxy?.stop(), origin?.stop(), new Promise<void>((r) => (tokens ? tokens.server.close(() => r()) : r()))]);
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it(`${ROUNDS} times: kill -9 the leading JobManager and its gateway; no registration lost, every job gets tokens issued after the failover, no duplicate job, no 502`, async () => {
      const statuses: number[] = [];
      const figures: { round: number; killToTokensMs: number; killToRunMs: number }[] = [];
      for (let round = 1; round <= ROUNDS; round++) {
        tokens.setEpoch(round - 1);
        const leader = await leaderIndex();
        const standby = 1 - leader;
        // The leader's gateway is the one that obtains tokens.
        await eventually(
          () => /"leading: every stored job/.test(gateways[leader]!.output()) || round > 1,
          'the leader gateway to lead',
          180_000,
          200,
        );

        // Jobs that run across the failover, one submitted through each gateway (the standby's is
        // registered by the leader's from ZooKeeper; the leader's dies with it): each task finishes
        // only once it reads a token issued after the kill.
        // Each jar is uploaded through one gateway and run through the other, as the operator's two
        // connections to the REST Service may land: the JobManagers share web.upload.dir.
        const probeIds: string[] = [];
        for (const via of [standby, leader]) {
          const jar = await uploadFile(gateways[1 - via]!.url, TEST_JOB_JAR, 'GatewayTestJob.jar');
          const probeId = newJobId();
          const probe = await json('POST', `${gateways[via]!.url}/v1/jars/${String(jar.body.filename).split('/').pop()}/run`, {
            jobId: probeId,
            entryClass: 'dev.flinkjargateway.testjobs.TokenProbe',
            programArgsList: ['--provider', 'oauth2', '--expect', `ha-e${round}-`, '--timeout-ms', '150000'],
            flinkConfiguration: { 'parallelism.default': '1' },
          });
          statuses.push(probe.status);
          expect(probe.status).toBe(200);
          probeIds.push(probeId);
        }
        for (const probeId of probeIds)
          await eventually(
            async () => (await json('GET', `${cluster.restUrls[leader]}/v1/jobs/${probeId}`)).body.state === 'RUNNING',
            'the probe job to run',
            180_000,
            200,
          );

        // A run by URI in flight on the leader's gateway when it dies (the jar drips in for seconds).
        originProxy.setPlan(onGet({ kind: 'drip', bytesPerSecond: 2 * 1024 * 1024 }));
        const runId = newJobId();
        const runBody = {
          jobId: runId,
          entryClass: WORDCOUNT_CLASS,
          programArgsList: [],
          flinkConfiguration: { 'user.artifacts.job-jar': `${originProxy.url}/jobs/wordcount-${round}.jar`, 'parallelism.default': '1' },
        };
        const holder = await uploadBytes(gateways[leader]!.url, [{ name: 'placeholder.jar', bytes: PLACEHOLDER, field: 'jarfile' }]);
        const holderId = String(holder.body.filename).split('/').pop();
        const inFlight = json('POST', `${gateways[leader]!.url}/v1/jars/${holderId}/run`, runBody).catch((err: unknown) => ({
          status: 0,
          body: { error: String(err) },
        }));
        // In flight: the gateway has begun reading the jar (the drip holds it for seconds).
        await eventually(
          () => originProxy.log.some((r) => r.method === 'GET' && r.path.endsWith(`/jobs/wordcount-${round}.jar`)),
          'the run by URI to fetch its jar',
          180_000,
          50,
        );

        const killedAt = Date.now();
        gateways[leader]!.kill();
        await cluster.killJobManager(leader);
        tokens.setEpoch(round);
        expect((await inFlight).status).toBe(0); // the connection died with the gateway: no answer, no 502
        originProxy.setPlan(() => ({ kind: 'pass' }));

        // The operator retries through the Service, which now reaches the other gateway: same jobId, same body.
        const holder2 = await retrying(
          () => uploadBytes(gateways[standby]!.url, [{ name: 'placeholder.jar', bytes: PLACEHOLDER, field: 'jarfile' }]),
          statuses,
        );
        const retried = await retrying(
          () => json('POST', `${gateways[standby]!.url}/v1/jars/${String(holder2.body.filename).split('/').pop()}/run`, runBody),
          statuses,
        );
        if (retried.status !== 200)
          process.stderr.write(`retried run: ${JSON.stringify({ retried, holder2 })}\n${gateways[standby]!.output().slice(-3000)}\n`);
        expect(retried.status).toBe(200);
        const killToRunMs = Date.now() - killedAt;

        // The probe jobs were recovered by the new leader and read a token issued after the kill.
        for (const probeId of probeIds) expect(await stateOf(gateways[standby]!.url, probeId, statuses)).toBe('FINISHED');
        expect(await stateOf(gateways[standby]!.url, runId, statuses)).toBe('FINISHED');
        const finishedSeenAt = Date.now();
        // Ordering, not a time bound: the survivor obtained fresh tokens after the kill, before the
        // probes (which wait for those tokens) were seen finished. The gap is reported, not bounded.
        const firstTokenAt = tokens.firstOfEpoch.get(round);
        expect(firstTokenAt).toBeDefined();
        expect(firstTokenAt!).toBeGreaterThanOrEqual(killedAt);
        expect(firstTokenAt!).toBeLessThanOrEqual(finishedSeenAt);
        const killToTokensMs = firstTokenAt! - killedAt;
        // One job per job id: Flink lists each once.
        const overview = (await json('GET', `${gateways[standby]!.url}/v1/jobs/overview`)).body.jobs as { jid: string }[];
        expect(overview.filter((j) => j.jid === runId)).toHaveLength(1);
        for (const probeId of probeIds) expect(overview.filter((j) => j.jid === probeId)).toHaveLength(1);
        figures.push({ round, killToTokensMs, killToRunMs });

        // The killed pair comes back as the standby of the next round.
        await cluster.restartJobManager(leader);
        await startGatewayFor(leader);
      }
      process.stderr.write(
        `HA failover figures (${VERSION}, ${engineName}): ${JSON.stringify({ rounds: ROUNDS, figures, statuses: countOf(statuses) })}\n`,
      );
      expect(statuses.filter((s) => s === 502)).toEqual([]);
      // Only the leading JobManager's gateway obtained: one client per epoch, the survivor of each kill
      // (a restarted gateway, a standby, asked for nothing).
      const clients = [...tokens.clientsOfEpoch].map(([epoch, set]) => ({ epoch, clients: [...set] }));
      process.stderr.write(`token clients per epoch: ${JSON.stringify(clients)}\n`);
      for (const c of clients) expect(c.clients).toHaveLength(1);
    }, 2_400_000);

    async function stateOf(url: string, jobId: string, statuses: number[]): Promise<string> {
      const deadline = Date.now() + 300_000;
      for (;;) {
        const r = await retrying(() => json('GET', `${url}/v1/jobs/${jobId}`), statuses);
        const state = String(r.body.state ?? '');
        if (['FINISHED', 'FAILED', 'CANCELED'].includes(state)) {
          // The chain of causes (a truncated exception history hid the cause of a CI failure).
          if (state === 'FAILED') await printFailure(url, jobId);
          else if (state !== 'FINISHED') process.stderr.write(`job ${jobId} ${state}\n`);
          return state;
        }
        if (Date.now() > deadline) return `still ${state || r.status}`;
        await sleep(500);
      }
    }
  });
}

function countOf(values: number[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[String(v)] = (out[String(v)] ?? 0) + 1;
  return out;
}
