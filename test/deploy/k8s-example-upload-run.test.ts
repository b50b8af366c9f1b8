import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import pino from 'pino';
import { Agent, FormData, request } from 'undici';
import { EmbeddedCluster } from '../../src/cluster/embedded-cluster';
import { freePort } from '../../src/cluster/process-group';
import { StandaloneCluster } from '../../src/cluster/standalone-cluster';
import { projectRoot } from '../../src/project-root';
import { eventually } from '../helpers/eventually';
import { newJobId, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';
import { distributionHome, TEST_JOB_JAR, TOKEN_BRIDGE_JAR } from '../helpers/flink-dist';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { buildJar } from '../helpers/jars';
import { KubeApiServer } from '../servers/kube-apiserver';
import { putObject, type S3Server, startS3Server } from '../servers/s3-server';
import { type ExampleSidecar, kubernetesExample } from './example-sidecar';
import { dynamicProperties, type K8sObject, loadManifests, ofKind, onlyOne, operatorFlinkConfig } from './manifests';

// examples/kubernetes/ as shipped, minus what only a cluster has: its two JobManagers (Flink 2.1.3's
// distribution, Kubernetes HA on a real kube-apiserver) with the FlinkDeployment's own
// flinkConfiguration, and a gateway process next to each with the sidecar's own arguments,
// environment and mounted files (gateway-config.yaml, the Secrets). The ReadWriteMany claim of
// pvc-uploads.yaml is one local directory both JobManagers and both gateways mount; the operator's
// two connections to the REST Service are a call to one gateway and a call to the other.

const VERSION = '2.1.3';
const log = pino({ level: process.env.K8S_EXAMPLE_TEST_LOG === '1' ? 'info' : 'warn' });
/** The operator's class-less placeholder jar (uploaded before a run by URI). */
const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });

const manifests = loadManifests();
const deployment = onlyOne(manifests, 'FlinkDeployment');
const namespace = deployment.metadata.namespace as string;
const clusterId = deployment.metadata.name as string;
const flinkConfiguration = deployment.spec.flinkConfiguration as Record<string, string>;
const jmPod = deployment.spec.jobManager.podTemplate.spec as K8sObject;
const mainContainer = (jmPod.containers as K8sObject[]).find((c) => c.name === 'flink-main-container')!;
/** The example's credentials Secret: its placeholder key pair is what the local S3 server accepts. */
const credentials = onlyOne(manifests, 'Secret', 'flink-jar-gateway-credentials').stringData as Record<string, string>;
const S3_KEY = { accessKeyId: credentials['s3.access-key']!, secretAccessKey: credentials['s3.secret-key']! };
/** The session job of flinksessionjob-s3.yaml names its jar in this bucket. */
const s3Job = onlyOne(manifests, 'FlinkSessionJob', 'team-a-app-1');
const jobJarUri = new URL(s3Job.spec.flinkConfiguration['user.artifacts.job-jar'] as string);
/** The service account of the JobManager pods, as the API server names it; the gateways share it. */
const serviceAccountUser = `system:serviceaccount:${namespace}:${deployment.spec.serviceAccount}`;

/**
 * Keys of the FlinkDeployment's configuration that only a pod can honour as written: fixed ports (two
 * local JobManagers would collide; the launcher gives each its own), and the JobManager's entrypoint
 * arguments, which the test applies to each JobManager itself. security.ssl.rest.* configure the
 * operator's client (the JobManager turns REST SSL off for its loopback endpoint in those arguments).
 */
/** The per-pod emptyDir where the gateway writes the bridge secret and the JobManager's bridge reads it. */
const BRIDGE_VOLUME = 'token-bridge';
const POD_ONLY = new Set([
  'rest.port',
  'jobmanager.rpc.port',
  'blob.server.port',
  'high-availability.jobmanager.port',
  'metrics.internal.query-service.port',
  'kubernetes.jobmanager.entrypoint.args',
  'kubernetes.rest-service.exposed.type',
]);

/** Client-credentials tokens for the gateways' oauth2 provider (a provider the example leaves to its user). */
function startTokenEndpoint(): Promise<{ server: Server; url: string; issued: () => number }> {
  let n = 0;
  const server = createServer((req, res) => {
    req.resume().on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: `k8s-example-${++n}`, token_type: 'Bearer', expires_in: 600 }));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`, issued: () => n }),
    ),
  );
}

/**
 * The session job's jar: its entry class (flinksessionjob-s3.yaml's, outside the packages Flink or the
 * bridge own, as fetched-only mode demands) starts the test jobs' TokenProbe, which fails unless its
 * job's token arrives through the bridge.
 */
function appJar(entryClass: string, work: string): string {
  const pkg = entryClass.split('.').slice(0, -1);
  const name = entryClass.split('.').at(-1)!;
  mkdirSync(join(work, 'src', ...pkg), { recursive: true });
  const source = join(work, 'src', ...pkg, `${name}.java`);
  writeFileSync(
    source,
    `package ${pkg.join('.')};\n\npublic class ${name} {\n  public static void main(String[] args) throws Exception {\n    dev.flinkjargateway.testjobs.TokenProbe.main(args);\n  }\n}\n`,
  );
  execFileSync('javac', ['--release', '17', '-cp', TEST_JOB_JAR, '-d', join(work, 'classes'), source], { stdio: 'pipe' });
  const jar = join(work, 'app.jar');
  copyFileSync(TEST_JOB_JAR, jar);
  execFileSync('jar', ['uf', jar, '-C', join(work, 'classes'), pkg[0]!], { stdio: 'pipe' });
  return jar;
}

describe(`examples/kubernetes/ as shipped: two JobManagers (Flink ${VERSION}, Kubernetes HA on a real API server) and their gateways share web.upload.dir`, () => {
  let dir: string;
  let kube: KubeApiServer;
  let s3: S3Server;
  let tokens: Awaited<ReturnType<typeof startTokenEndpoint>>;
  let cluster: StandaloneCluster;
  const gatewayPorts: number[] = [];
  let gateways: GatewayProcess[] = [];
  let sidecars: ExampleSidecar[] = [];
  let operator: Agent;
  /** The local directories two pods share: the uploads claim, and the Secrets both mount. */
  let shared: Map<string, string>;
  /** Where the pod's paths are, locally (the JobManager container's mounts and the sidecar's). */
  let podPath: (text: string) => string;

  /** The local directories of pod `i`'s volumes: the shared ones, and its own emptyDir for the bridge secret. */
  function podVolumes(i: number): Map<string, string> {
    return new Map([...shared, [BRIDGE_VOLUME, join(dir, `pod-${i}`, BRIDGE_VOLUME)]]);
  }

  /** The JobManager container's volume mounts that stand for a shared local directory, and the truststore the init container builds. */
  function mainMounts(): Map<string, string> {
    const out = new Map<string, string>();
    for (const m of mainContainer.volumeMounts as K8sObject[]) {
      if (shared.has(m.name)) out.set(m.mountPath, shared.get(m.name)!);
    }
    return out;
  }

  /**
   * The example's gateway-truststore init container, run here as written: its shell script with the
   * pod's paths mapped to local ones and JAVA_HOME this machine's JDK (the Flink image sets its own).
   */
  function buildTruststore(mounts: Map<string, string>): void {
    const init = (jmPod.initContainers as K8sObject[]).find((c) => c.name === 'gateway-truststore')!;
    const [sh, flags, script] = init.command as string[];
    const local = new Map(mounts);
    for (const m of init.volumeMounts as K8sObject[]) if (shared.has(m.name)) local.set(m.mountPath, shared.get(m.name)!);
    let text = script!;
    for (const [from, to] of [...local].sort((a, b) => b[0].length - a[0].length)) text = text.split(from).join(to);
    const javaHome = dirname(dirname(realpathSync(execFileSync('sh', ['-c', 'command -v java']).toString().trim())));
    execFileSync(sh!, [flags!, text], {
      env: { ...process.env, JAVA_HOME: javaHome, PATH: `${javaHome}/bin:${process.env.PATH}` },
      stdio: 'pipe',
    });
  }

  /** A path of the JobManager container, on the local directories of `volumes`. */
  function mainPath(path: string, volumes: Map<string, string>): string {
    const m = (mainContainer.volumeMounts as K8sObject[])
      .filter((x) => path.startsWith(`${x.mountPath}/`))
      .sort((a, b) => b.mountPath.length - a.mountPath.length)[0]!;
    return join(volumes.get(m.name)!, path.slice(m.mountPath.length + 1));
  }

  async function startGateways(extra: string[] = []): Promise<void> {
    gateways = [];
    sidecars = [];
    for (const i of [0, 1]) {
      const sidecar = kubernetesExample(join(dir, `pod-${i}`), { volumes: podVolumes(i), flinkConfDir: cluster.confDir });
      sidecars.push(sidecar);
      gateways.push(
        await startGatewayProcess(
          [
            ...sidecar.args,
            // The JobManager of this "pod" (http://127.0.0.1:8082 in the example), and the listening
            // port the example's bridge URL names (8081 there, a free one here).
            `-Dgateway.cluster.rest-url=${cluster.restUrls[i]}`,
            `-Drest.port=${gatewayPorts[i]}`,
            // A private S3-compatible store, as gateway-config.yaml says to configure one.
            `-Ds3.endpoint=${s3.url}`,
            '-Ds3.path.style.access=true',
            `-Dgateway.artifacts.restricted-hosts.allowed=127.0.0.1:${s3.port}`,
            // A token provider (the example configures none): the job reads its token through the bridge.
            `-Dsecurity.delegation.token.provider.oauth2.token-endpoint=${tokens.url}`,
            `-Dsecurity.delegation.token.provider.oauth2.client-id=example-gateway-${i}`,
            '-Dsecurity.delegation.token.provider.oauth2.client-secret=example-client-secret',
            ...extra,
          ],
          { env: { ...process.env, ...sidecar.env }, timeoutMs: 60_000 },
        ),
      );
    }
    operator = new Agent({ connect: { ca: sidecars[0]!.ca, cert: sidecars[0]!.operator.cert, key: sidecars[0]!.operator.key } });
  }

  async function stopGateways(): Promise<void> {
    await Promise.all(gateways.map((g) => g.stop()));
    await operator?.close();
  }

  /** A call as the operator makes it: HTTPS with its client certificate. */
  async function call(method: string, url: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await request(url, {
      method: method as 'GET',
      dispatcher: operator,
      ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  async function upload(gatewayUrl: string, name: string, bytes: Buffer): Promise<{ status: number; body: Record<string, unknown> }> {
    const form = new FormData();
    form.append('jarfile', new Blob([bytes]), name);
    const res = await request(`${gatewayUrl}/v1/jars/upload`, { method: 'POST', body: form, dispatcher: operator });
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
  }

  async function finalState(gatewayUrl: string, jobId: string): Promise<string> {
    for (;;) {
      const r = await call('GET', `${gatewayUrl}/v1/jobs/${jobId}`);
      const state = String(r.body.state ?? '');
      if (['FINISHED', 'FAILED', 'CANCELED'].includes(state)) return state;
      await new Promise((res) => setTimeout(res, 500));
    }
  }

  const jarIdOf = (r: { body: Record<string, unknown> }) => String(r.body.filename).split('/').pop()!;

  beforeAll(async () => {
    EmbeddedCluster.ensureBuilt(projectRoot(__dirname), log);
    dir = mkdtempSync(join(tmpdir(), 'fjg-k8s-example-'));
    shared = new Map();
    // What both pods mount from one source: the uploads claim, and the Secrets of the pod template.
    for (const v of jmPod.volumes as K8sObject[]) {
      if (v.persistentVolumeClaim || v.secret) {
        shared.set(v.name, join(dir, 'shared', v.name));
        mkdirSync(shared.get(v.name)!, { recursive: true });
      }
    }
    // The pod's emptyDir for the truststore (one per pod in Kubernetes; both would hold the same file).
    shared.set('flink-truststore', join(dir, 'shared', 'flink-truststore'));
    mkdirSync(shared.get('flink-truststore')!, { recursive: true });
    const bucket = jobJarUri.hostname;
    [kube, s3, tokens] = await Promise.all([
      // The JobManagers' own identity has Flink's verbs (the operator's "flink" Role); the gateways
      // have the example's Role alone, as its RoleBinding grants the pod's service account.
      KubeApiServer.start({
        users: [
          { name: serviceAccountUser, groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`] },
          { name: 'flink-jobmanager' },
        ],
      }),
      startS3Server({ keys: { [S3_KEY.accessKeyId]: S3_KEY.secretAccessKey }, buckets: [bucket] }),
      startTokenEndpoint(),
    ]);
    await kube.createNamespace(namespace);
    for (const m of [...ofKind(manifests, 'Role'), ...ofKind(manifests, 'RoleBinding')].filter((x) => x.file === 'rbac-gateway-ha.yaml')) {
      const plural = m.obj.kind === 'Role' ? 'roles' : 'rolebindings';
      const r = await kube.api('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/${plural}`, m.obj);
      if (r.status !== 201) throw new Error(`cannot apply ${m.file}: ${JSON.stringify(r.body)}`);
    }
    await kube.grantConfigMaps(namespace, 'flink-jobmanager', ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);
    await putObject(
      s3.url,
      S3_KEY,
      bucket,
      jobJarUri.pathname.slice(1),
      readFileSync(appJar(s3Job.spec.job.entryClass as string, join(dir, 'app-jar'))),
    );

    // The first sidecar's files (TLS material, the Secrets) fill the shared directories; a Secret
    // volume with items gets those keys of its Secret (gateway-ca: the TLS Secret's ca.crt).
    kubernetesExample(join(dir, 'pod-setup'), { volumes: shared });
    for (const v of (jmPod.volumes as K8sObject[]).filter((x) => x.secret?.items)) {
      const source = (jmPod.volumes as K8sObject[]).find((x) => x.secret?.secretName === v.secret.secretName && !x.secret.items)!;
      for (const item of v.secret.items as { key: string; path: string }[])
        copyFileSync(join(shared.get(source.name)!, item.key), join(shared.get(v.name)!, item.path));
    }
    const mounts = mainMounts();
    buildTruststore(mounts);
    const local = [...mounts].sort((a, b) => b[0].length - a[0].length);
    podPath = (text: string) =>
      local.reduce(
        (t, [from, to]) => t.replace(new RegExp(`(?<![\\w.-])${from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=/|$|\\s)`, 'g'), to),
        text,
      );
    for (let i = 0; i < 2; i++) gatewayPorts.push(await freePort());

    // The FlinkDeployment's configuration as the operator writes it, with the pod's paths mapped to
    // the local directories; the in-cluster service account stands as a kubeconfig for it.
    const config: Record<string, string> = {};
    for (const [k, v] of Object.entries(operatorFlinkConfig(deployment))) {
      if (POD_ONLY.has(k) || k.startsWith('security.ssl.rest.')) continue;
      config[k] = podPath(v);
    }
    config['high-availability.storageDir'] = `file://${join(dir, 'ha-storage')}`;
    config['kubernetes.config.file'] = kube.kubeconfig(serviceAccountUser, namespace);
    const entrypoint = dynamicProperties(flinkConfiguration['kubernetes.jobmanager.entrypoint.args'] ?? '');
    cluster = await StandaloneCluster.start({
      home: distributionHome(VERSION),
      jobManagers: 2,
      taskManagers: 1,
      slots: 4,
      jvmOptions: '-XX:+UseSerialGC -XX:TieredStopAtLevel=1',
      // The init containers' copy of the bridge jar into lib/ of the JobManagers and the TaskManager.
      extraLibJars: [TOKEN_BRIDGE_JAR],
      flinkConfig: config,
      jobManagerConfig: (i) => ({
        // The bridge secret on this pod's own volume (the JobManager container's mount of it).
        'security.delegation.token.provider.gateway.secret-file': mainPath(
          flinkConfiguration['security.delegation.token.provider.gateway.secret-file']!,
          podVolumes(i),
        ),
        // The JobManager's own entrypoint arguments (its REST endpoint on loopback, plain HTTP).
        ...Object.fromEntries([...entrypoint].filter(([k]) => !k.startsWith('rest.'))),
        'kubernetes.config.file': kube.kubeconfig('flink-jobmanager', namespace),
        // The bridge URL as the example writes it, with this gateway's port for 8081.
        'security.delegation.token.provider.gateway.url': flinkConfiguration['security.delegation.token.provider.gateway.url']!.replace(
          ':8081',
          `:${gatewayPorts[i]}`,
        ),
      }),
      startupTimeoutMs: 240_000,
      log,
    });
    await startGateways();
  }, 900_000);

  afterAll(async () => {
    for (const g of gateways) g.kill();
    await operator?.close();
    await cluster?.stop();
    await Promise.all([kube?.stop(), s3?.stop(), new Promise<void>((r) => (tokens ? tokens.server.close(() => r()) : r()))]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("the example's settings reach the processes: Kubernetes HA with the gateways' store on ConfigMaps, one web.upload.dir on the shared claim", async () => {
    expect(flinkConfiguration['high-availability.type']).toBe('kubernetes');
    const uploads = shared.get(
      (jmPod.volumes as K8sObject[]).find((v) => v.persistentVolumeClaim?.claimName === 'team-a-session-uploads')!.name,
    )!;
    // Both JobManagers run with the FlinkDeployment's web.upload.dir, mapped to the shared directory.
    for (const url of cluster.restUrls) {
      const conf = (await call('GET', `${url}/v1/jobmanager/config`)) as unknown as { body: { key: string; value: string }[] };
      expect(conf.body.find((e) => e.key === 'web.upload.dir')?.value).toBe(uploads);
    }
    // Flink's leader ConfigMap is on the API server, and the gateways follow it: exactly one leads.
    const leader = await kube.api('GET', `/api/v1/namespaces/${namespace}/configmaps/${clusterId}-cluster-config-map`);
    expect(leader.status).toBe(200);
    await eventually(
      async () => {
        const leading = await Promise.all(
          gateways.map(
            async (g) => ((await call('GET', `${g.url}/gateway/v1/tokens`)).body.ha as { leading?: boolean } | undefined)?.leading === true,
          ),
        );
        return leading.filter(Boolean).length === 1;
      },
      'one gateway to lead',
      120_000,
      500,
    );
  });

  it.each([
    [0, 1],
    [1, 0],
  ])(
    "the operator's run by URI as shipped (fetched-only): placeholder uploaded through gateway %i, run through gateway %i; the job reads its token through the bridge",
    async (up, run) => {
      const holder = await upload(gateways[up]!.url, 'placeholder.jar', PLACEHOLDER);
      expect(holder.status).toBe(200);
      const jobId = newJobId();
      const r = await call('POST', `${gateways[run]!.url}/v1/jars/${jarIdOf(holder)}/run`, {
        jobId,
        entryClass: s3Job.spec.job.entryClass,
        programArgsList: ['--provider', 'oauth2', '--expect', 'k8s-example-', '--timeout-ms', '150000'],
        flinkConfiguration: { ...(s3Job.spec.flinkConfiguration as Record<string, string>), 'parallelism.default': '1' },
      });
      if (r.status !== 200) process.stderr.write(`${JSON.stringify(r.body)}\n${gateways[run]!.output().slice(-3000)}\n`);
      expect(r.status).toBe(200);
      expect(await finalState(gateways[up]!.url, jobId)).toBe('FINISHED');
      expect(tokens.issued()).toBeGreaterThan(0);
    },
    240_000,
  );

  describe('with gateway.policy.mode relaxed to open, so that FlinkSessionJobs with a jarURI run (the operator uploads the jar itself)', () => {
    beforeAll(async () => {
      await stopGateways();
      await startGateways(['-Dgateway.policy.mode=open']);
    }, 120_000);

    it.each([
      [0, 1],
      [1, 0],
    ])(
      'a jar uploaded through gateway %i is listed and runs through gateway %i',
      async (up, run) => {
        const jar = await upload(gateways[up]!.url, 'WordCount.jar', readFileSync(WORDCOUNT_JAR));
        expect(jar.status).toBe(200);
        const jarId = jarIdOf(jar);
        const listed = await call('GET', `${gateways[run]!.url}/v1/jars`);
        expect((listed.body.files as { id: string }[]).map((f) => f.id)).toContain(jarId);
        const jobId = newJobId();
        const r = await call('POST', `${gateways[run]!.url}/v1/jars/${jarId}/run`, {
          jobId,
          entryClass: WORDCOUNT_CLASS,
          programArgsList: [],
          flinkConfiguration: { 'parallelism.default': '1' },
        });
        if (r.status !== 200) process.stderr.write(`${JSON.stringify(r.body)}\n`);
        expect(r.status).toBe(200);
        expect(await finalState(gateways[run]!.url, jobId)).toBe('FINISHED');
        // The jar is where both JobManagers look: in the shared claim's directory.
        const uploads = shared.get(
          (jmPod.volumes as K8sObject[]).find((v) => v.persistentVolumeClaim?.claimName === 'team-a-session-uploads')!.name,
        )!;
        expect(readdirSync(join(uploads, 'flink-web-upload'))).toContain(jarId);
      },
      240_000,
    );
  });
});
