import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import type { ValidateFunction } from 'ajv';
import { parse, stringify } from 'yaml';
import { builtinPlugins } from '../../fs-plugins';
import { artifactOptions } from '../../src/artifacts/options';
import { UriAllowList } from '../../src/artifacts/uri-allow-list';
import { createRegistry } from '../../src/composition';
import { CLUSTER_FLINK_CONF_KEY, JOBMANAGER_OWN_KEYS } from '../../src/config/cluster-flink-config';
import { envNameFor, loadRaw, parseArgs } from '../../src/config/load';
import { coreOptions } from '../../src/config/options';
import type { Configuration } from '../../src/config/registry';
import { projectRoot } from '../../src/project-root';
import { haOptions, haStoreOf } from '../../src/ha/ha-options';
import { exposureProblem } from '../../src/http/auth';
import { JOB_JAR_KEY } from '../../src/submission/run-request';
import { parseDockerfile } from './dockerfile';
import {
  dynamicProperties,
  FLINK_CONF_VOLUME,
  type K8sObject,
  label,
  loadManifests,
  type Manifest,
  ofKind,
  onlyOne,
  operatorFlinkConfig,
} from './manifests';
import {
  crdToJsonSchema,
  createValidatorFactory,
  describeErrors,
  K8S_VERSION,
  loadCoreSchemas,
  loadOperatorCrds,
  operatorApiVersion,
} from './schemas';

// Validates examples/kubernetes/ against the operator's CRDs (Maven Central) and the core Kubernetes
// schemas (PyPI kubernetes-validate), and checks that the gateway's configuration and the containers of
// the JobManager pod agree with each other. No API server or container engine is involved.

const FLINK_CRD_VERSION = 'v1beta1';
/**
 * flinkVersion values newer than the CRD of the operator-api release served here. The examples target
 * operator >= 1.14 with a Flink 2.1 image, which needs v2_1 (the operator writes Flink 2's config.yaml
 * only for v2_0 and newer); the served 1.10.0 CRD stops at v1_20. This is the one change made to the
 * fetched schema, and a test below fails once the CRD knows these values, so the patch goes away then.
 */
const FLINK_VERSIONS_NEWER_THAN_CRD = ['v2_0', 'v2_1'];
/** Labels Flink gives the pods of a native-mode cluster (flink-kubernetes Constants/KubernetesUtils). */
const flinkPodLabels = (cluster: string, component: 'jobmanager' | 'taskmanager') => ({
  type: 'flink-native-kubernetes',
  app: cluster,
  component,
});
/** Flink merges the pod template's container of this name with the JobManager container it generates. */
const MAIN_CONTAINER = 'flink-main-container';
const GATEWAY_CONTAINER = 'flink-jar-gateway';
/** status.podIP stands in as a TEST-NET-1 address: parsed, never contacted. */
const POD_IP = '192.0.2.10';
/** The operator's DefaultValidator name rule for FlinkDeployments (and session jobs' deploymentName). */
const DEPLOYMENT_NAME = /^[a-z]([-a-z\d]{0,43}[a-z\d])?$/;

const root = projectRoot(__dirname);
const manifests = loadManifests();
const flinkManifests = manifests.filter((m) => m.obj.apiVersion?.startsWith('flink.apache.org/'));
/** Kinds with no schema available offline (cert-manager's CRDs are not in a package registry here): wiring checks only. */
const NO_OFFLINE_SCHEMA = new Set(['cert-manager.io/v1/Certificate']);
const coreManifests = manifests.filter(
  (m) => !m.obj.apiVersion?.startsWith('flink.apache.org/') && !NO_OFFLINE_SCHEMA.has(`${m.obj.apiVersion}/${m.obj.kind}`),
);
const registry = createRegistry(builtinPlugins);

const deployment = onlyOne(manifests, 'FlinkDeployment');
const sessionJobs = ofKind(manifests, 'FlinkSessionJob');
const flinkConf = deployment.spec.flinkConfiguration as Record<string, string>;
const jmPod = deployment.spec.jobManager.podTemplate as K8sObject;
const containers = jmPod.spec.containers as K8sObject[];
const container = (name: string): K8sObject => {
  const c = containers.find((x) => x.name === name);
  if (!c) throw new Error(`the JobManager pod template has no container ${name}`);
  return c;
};
const gateway = container(GATEWAY_CONTAINER);
const main = container(MAIN_CONTAINER);
const volume = (name: string): K8sObject | undefined => (jmPod.spec.volumes as K8sObject[]).find((v) => v.name === name);
const mountOf = (c: K8sObject, volumeName: string): K8sObject | undefined =>
  (c.volumeMounts as K8sObject[] | undefined)?.find((m) => m.name === volumeName);
const configVolume = (jmPod.spec.volumes as K8sObject[]).find((v) => v.configMap)!;
const secretVolume = (jmPod.spec.volumes as K8sObject[]).find((v) => v.secret)!;
const configMap = onlyOne(manifests, 'ConfigMap', configVolume.configMap.name);
const secret = onlyOne(manifests, 'Secret', secretVolume.secret.secretName);

/**
 * The gateway's configuration exactly as the sidecar would load it: its args (with the mounted
 * ConfigMap file and Secret directory replaced by local copies), its environment (status.podIP
 * resolved to POD_IP), the same loader and registry as bin/flink-jar-gateway.js.
 */
function loadGatewayConfig(): {
  keys: string[];
  config: Configuration;
  cluster: Map<string, string>;
  clusterKeys: string[];
  args: string[];
  env: Record<string, string>;
} {
  const dir = mkdtempSync(join(tmpdir(), 'fjg-k8s-'));
  try {
    const configMount = mountOf(gateway, configVolume.name)!.mountPath as string;
    const secretDir = join(dir, 'secrets');
    mkdirSync(secretDir);
    // Flink's flink-config-volume in the sidecar: a directory holding the operator's config.yaml.
    const flinkConfDir = join(dir, 'flink-conf');
    mkdirSync(flinkConfDir);
    writeFileSync(join(flinkConfDir, 'config.yaml'), stringify(operatorFlinkConfig(deployment)));
    for (const [k, v] of Object.entries({ ...(secret.stringData ?? {}), ...decodeData(secret.data) }))
      writeFileSync(join(secretDir, k), String(v));
    const args = (gateway.args as string[]).map((a) => {
      if (!a.startsWith(`${configMount}/`)) return a;
      const file = join(dir, posix.relative(configMount, a));
      writeFileSync(file, String(configMap.data[posix.relative(configMount, a)] ?? ''));
      return file;
    });
    const env: Record<string, string> = {};
    for (const e of (gateway.env as K8sObject[] | undefined) ?? []) {
      env[e.name] = e.valueFrom?.fieldRef?.fieldPath === 'status.podIP' ? POD_IP : String(e.value ?? '');
    }
    const cli = parseArgs([...args, `-D${coreOptions.secretsDir.key}=${secretDir}`, `-D${CLUSTER_FLINK_CONF_KEY}=${flinkConfDir}`]);
    const { raw, cluster } = loadRaw(registry, cli, env);
    const fromCluster = (k: string) => raw.get(k)?.source.startsWith('cluster Flink configuration') === true;
    // The manifests name files inside the pod (certificates, the tokens file): check values and rules, not files.
    return {
      keys: [...raw.keys()].filter((k) => k !== coreOptions.secretsDir.key && k !== CLUSTER_FLINK_CONF_KEY && !fromCluster(k)),
      config: registry.resolve(raw, cluster, { files: false }),
      cluster,
      clusterKeys: [...raw.keys()].filter(fromCluster),
      args: gateway.args,
      env,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Flink's high-availability.type (or its deprecated key high-availability), lower case; 'none' without one. */
function haTypeOf(conf: Record<string, string>): string {
  return (conf['high-availability.type'] ?? conf['high-availability'] ?? 'NONE').trim().toLowerCase();
}

/**
 * The operator's rule for standby JobManagers (DefaultValidator: more than one replica only with HA)
 * and Flink's for HA (a JobManager with HA does not start without high-availability.storageDir).
 */
function standbyProblem(d: K8sObject): string | undefined {
  const conf = d.spec.flinkConfiguration as Record<string, string>;
  const ha = haTypeOf(conf) !== 'none';
  if ((d.spec.jobManager.replicas ?? 1) > 1 && !ha) return 'High availability should be enabled when starting standby JobManagers.';
  if (ha && !conf['high-availability.storageDir']) return 'high-availability.storageDir is required with HA';
  return undefined;
}

/** The name of the volume `c` mounts `file` from (the longest mount path that holds it). */
function volumeOfFile(c: K8sObject, file: string): string | undefined {
  return ((c.volumeMounts as K8sObject[] | undefined) ?? [])
    .filter((m) => file.startsWith(`${m.mountPath}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0]?.name;
}

function decodeData(data: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
}

function gatewayYaml(): Record<string, unknown> {
  const doc = parse(String(configMap.data['gateway.yaml'])) as Record<string, unknown>;
  // Flat keys only (one Flink-style key per line), so nothing depends on how nesting is flattened.
  for (const [k, v] of Object.entries(doc))
    if (v !== null && typeof v === 'object') throw new Error(`gateway.yaml: ${k} is not a flat key`);
  return doc;
}

/** Whether the gateway serves HTTPS (gateway.tls.cert/key or a keystore). */
function gatewayTls(config: Configuration): boolean {
  return config.getOptional(coreOptions.tlsCert) !== undefined || config.getOptional(coreOptions.tlsKeystore) !== undefined;
}

let validatorFor: (schema: Record<string, unknown>) => ValidateFunction;
let coreSchemas: Map<string, Record<string, unknown>>;
let crdValidators: Map<string, ValidateFunction>;
let flinkVersionEnum: string[];

beforeAll(async () => {
  const [crds, core] = await Promise.all([loadOperatorCrds(), loadCoreSchemas()]);
  validatorFor = createValidatorFactory(core.definitions);
  coreSchemas = core.byGvk;
  crdValidators = new Map();
  for (const kind of ['FlinkDeployment', 'FlinkSessionJob']) {
    const crd = crds.get(kind);
    if (!crd) throw new Error(`flink-kubernetes-operator-api ${operatorApiVersion()} has no ${kind} CRD`);
    const schema = crdToJsonSchema(crd, FLINK_CRD_VERSION);
    if (kind === 'FlinkDeployment') {
      const fv = (schema as K8sObject).properties.spec.properties.flinkVersion;
      flinkVersionEnum = [...fv.enum];
      fv.enum = [...fv.enum, ...FLINK_VERSIONS_NEWER_THAN_CRD.filter((v) => !fv.enum.includes(v))];
    }
    crdValidators.set(kind, validatorFor(schema));
  }
}, 300_000);

const coreValidators = new Map<string, ValidateFunction>();
function coreValidator(apiVersion: string, kind: string): ValidateFunction {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const key = `${group}/${version}/${kind}`;
  let v = coreValidators.get(key);
  if (!v) {
    const schema = coreSchemas.get(key);
    if (!schema) throw new Error(`no Kubernetes ${K8S_VERSION} schema for ${key}`);
    v = validatorFor(schema);
    coreValidators.set(key, v);
  }
  return v;
}

function expectValid(validate: ValidateFunction, obj: unknown, what: string): void {
  const ok = validate(obj);
  expect({ what, errors: ok ? '' : describeErrors(validate.errors) }).toEqual({ what, errors: '' });
}

describe(`Flink Kubernetes Operator CRDs (flink-kubernetes-operator-api ${operatorApiVersion()}, Maven Central)`, () => {
  it('the examples contain a FlinkDeployment and session jobs for S3, Azure (wasbs, abfss) and HTTPS', () => {
    const schemes = sessionJobs.map((m) => new URL(m.obj.spec.flinkConfiguration[JOB_JAR_KEY]).protocol);
    expect(new Set(schemes)).toEqual(new Set(['s3:', 'wasbs:', 'abfss:', 'https:']));
    expect(deployment.spec.job).toBeUndefined();
  });

  it('the CRD does not know flinkVersion v2_1 yet: the examples need it, so the schema gets exactly that value added', () => {
    expect(flinkVersionEnum).toContain('v1_20');
    // When this fails, the fetched CRD knows the newer versions: drop FLINK_VERSIONS_NEWER_THAN_CRD.
    expect(flinkVersionEnum.filter((v) => FLINK_VERSIONS_NEWER_THAN_CRD.includes(v))).toEqual([]);
    expect(deployment.spec.flinkVersion).toBe('v2_1');
    expect(deployment.spec.image).toMatch(/^flink:2\.1(\.\d+)?([-@].*)?$/);
  });

  it.each(flinkManifests.map((m) => [label(m), m] as [string, Manifest]))('%s matches its CRD', (_name, m) => {
    expectValid(crdValidators.get(m.obj.kind)!, m.obj, label(m));
  });

  it('the CRD schemas catch a misspelt field and a non-string configuration value (control)', () => {
    const bad = structuredClone(deployment);
    bad.spec.jobManager.podTemplate.spec.containers[1].volumeMount = [];
    bad.spec.flinkConfiguration['rest.port'] = 8081;
    const validate = crdValidators.get('FlinkDeployment')!;
    expect(validate(bad)).toBe(false);
    const errors = describeErrors(validate.errors);
    expect(errors).toContain('volumeMount');
    expect(errors).toContain('/spec/flinkConfiguration/rest.port must be string');
  });
});

describe(`core Kubernetes schemas (${K8S_VERSION}, strict)`, () => {
  it.each(coreManifests.map((m) => [label(m), m] as [string, Manifest]))('%s is valid', (_name, m) => {
    expectValid(coreValidator(m.obj.apiVersion, m.obj.kind), m.obj, label(m));
  });

  it('the JobManager and TaskManager pod templates are valid PodTemplateSpecs (what operator >= 1.11 expects; no apiVersion/kind)', () => {
    expectValid(coreValidator('v1', 'PodTemplateSpec'), jmPod, 'spec.jobManager.podTemplate');
    expectValid(coreValidator('v1', 'PodTemplateSpec'), deployment.spec.taskManager.podTemplate, 'spec.taskManager.podTemplate');
  });

  it('the core schemas catch an unknown field (control)', () => {
    const bad = structuredClone(onlyOne(manifests, 'NetworkPolicy'));
    bad.spec.ingres = bad.spec.ingress;
    expect(coreValidator('networking.k8s.io/v1', 'NetworkPolicy')(bad)).toBe(false);
  });
});

describe("the operator's own validation rules (DefaultValidator)", () => {
  it('FlinkDeployment: name, service account, memory, replicas, forbidden and overlapping keys', () => {
    expect(deployment.metadata.name).toMatch(DEPLOYMENT_NAME);
    expect(deployment.spec.serviceAccount).toEqual(expect.any(String));
    expect(deployment.spec.jobManager.resource.memory).toEqual(expect.any(String));
    expect(deployment.spec.taskManager.resource.memory).toEqual(expect.any(String));
    // More than one JobManager needs HA (and HA needs its storage directory).
    expect(standbyProblem(deployment)).toBeUndefined();
    for (const k of ['kubernetes.namespace', 'kubernetes.cluster-id', 'high-availability.cluster-id'])
      expect(Object.keys(flinkConf)).not.toContain(k);
    // Flink 2 config.yaml: the operator refuses keys where one is a prefix of another ("a.b" and "a.b.c").
    const keys = Object.keys(flinkConf);
    expect(keys.flatMap((a) => keys.filter((b) => b.startsWith(`${a}.`)).map((b) => `${a} -> ${b}`))).toEqual([]);
  });

  it('the example is an HA session cluster: two JobManagers with Kubernetes HA; standbys without HA are refused (control)', () => {
    expect(deployment.spec.jobManager.replicas).toBe(2);
    expect(haTypeOf(flinkConf)).toBe('kubernetes');
    const noHa = structuredClone(deployment);
    delete noHa.spec.flinkConfiguration['high-availability.type'];
    expect(standbyProblem(noHa)).toMatch(/High availability should be enabled/);
    const noStorage = structuredClone(deployment);
    delete noStorage.spec.flinkConfiguration['high-availability.storageDir'];
    expect(standbyProblem(noStorage)).toMatch(/storageDir/);
    const single = structuredClone(noHa);
    single.spec.jobManager.replicas = 1;
    expect(standbyProblem(single)).toBeUndefined();
  });

  it.each(sessionJobs.map((m) => [label(m), m] as [string, Manifest]))(
    '%s: a running stateless job of the session cluster, with no jarURI',
    (_name, m) => {
      const { spec, metadata } = m.obj;
      expect(spec.deploymentName).toBe(deployment.metadata.name);
      expect(metadata.namespace).toBe(deployment.metadata.namespace);
      expect(spec.job.jarURI).toBeUndefined();
      expect(spec.job.entryClass).toEqual(expect.any(String));
      expect(spec.job.state ?? 'running').toBe('running');
      // last-state is refused for session jobs; savepoint needs a savepoint directory in the cluster config.
      expect(spec.job.upgradeMode ?? 'stateless').toBe('stateless');
      expect(spec.job.parallelism).toBeGreaterThanOrEqual(1);
    },
  );
});

describe("the gateway's configuration", () => {
  it("every key in the ConfigMap, the sidecar's -D arguments, its FLINK_GATEWAY_* environment and the Secret is a gateway option", () => {
    const { keys } = loadGatewayConfig();
    expect(keys.length).toBeGreaterThan(5);
    expect(keys.filter((k) => registry.lookup(k) === undefined)).toEqual([]);
    for (const e of (gateway.env as K8sObject[] | undefined) ?? []) {
      if (!e.name.startsWith('FLINK_GATEWAY_')) continue;
      expect({ env: e.name, known: registry.all().some((d) => !d.key.includes('<') && envNameFor(d.key) === e.name) }).toEqual({
        env: e.name,
        known: true,
      });
    }
    for (const k of Object.keys({ ...secret.stringData, ...secret.data }))
      expect({ k, known: registry.lookup(k) !== undefined }).toEqual({ k, known: true });
  });

  it('resolves (types, ranges, enums) as the gateway does at start, with remote jars on and every interface of the pod as bind address', () => {
    const { config } = loadGatewayConfig();
    expect(config.get(coreOptions.jarUriEnable)).toBe(true);
    expect(config.get(coreOptions.restBindAddress)).toBe('0.0.0.0');
    expect(config.get(artifactOptions.handoff)).toBe('upload');
  });

  it('credentials only in the Secret: no sensitive key in the ConfigMap, only sensitive keys with placeholder values in the Secret', () => {
    // Declared sensitivity (the name heuristic would also flag gateway.secrets.dir, a path).
    const declaredSensitive = (k: string) => registry.lookup(k)?.sensitive === true;
    expect(Object.keys(gatewayYaml()).filter(declaredSensitive)).toEqual([]);
    const entries = Object.entries({ ...secret.stringData, ...decodeData(secret.data) });
    expect(entries.length).toBeGreaterThan(0);
    for (const [k, v] of entries) {
      expect({ k, sensitive: declaredSensitive(k) }).toEqual({ k, sensitive: true });
      expect({ k, placeholder: /REPLACE_WITH_/.test(String(v)) }).toEqual({ k, placeholder: true });
    }
  });

  it.each(sessionJobs.map((m) => [label(m), m] as [string, Manifest]))(
    '%s names a jar URI the gateway accepts, a built-in plugin reads, and the Secret variant has credentials for',
    (_name, m) => {
      const { config } = loadGatewayConfig();
      const uri = new URL(m.obj.spec.flinkConfiguration[JOB_JAR_KEY]);
      const scheme = uri.protocol.slice(0, -1);
      expect(config.get(artifactOptions.allowedSchemes)).toContain(scheme);
      // The example's allow-list admits the example's own jobs.
      expect(new UriAllowList(config.get(artifactOptions.allowedUris)).check(uri).verdict).toMatch(/^matched /);
      expect(builtinPlugins.filter((p) => p.schemes.includes(scheme)).map((p) => p.name)).toHaveLength(1);
      const secretKeys = Object.keys({ ...secret.stringData, ...secret.data });
      const account = uri.hostname.split('.')[0];
      const needed = {
        s3: ['s3.access-key', 's3.secret-key'],
        wasbs: [`fs.azure.account.key.${account}.blob.core.windows.net`],
        abfss: [`fs.azure.account.key.${account}.blob.core.windows.net`],
        https: ['user.artifacts.http-headers'],
      }[scheme];
      expect(needed?.filter((k) => !secretKeys.includes(k))).toEqual([]);
    },
  );
});

describe('wiring between the JobManager, the gateway sidecar and the cluster', () => {
  const restPort = Number(flinkConf['rest.port']);

  it('the REST Service lands on the gateway: flinkConfiguration sets rest.port and no rest.bind-port, and the gateway listens on rest.port', () => {
    // Flink's REST Service: port = rest.port, targetPort = rest.bind-port (defaults to rest.port).
    expect(restPort).toBeGreaterThan(0);
    expect(Object.keys(flinkConf)).not.toContain('rest.bind-port');
    // Dropped by Flink before the pods see it, so it would only mislead.
    expect(Object.keys(flinkConf)).not.toContain('rest.bind-address');
    expect(loadGatewayConfig().config.get(coreOptions.restPort)).toBe(restPort);
    const scheme = gatewayTls(loadGatewayConfig().config) ? 'HTTPS' : 'HTTP';
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      expect({ probe, port: gateway[probe]?.httpGet?.port, scheme: gateway[probe]?.httpGet?.scheme ?? 'HTTP' }).toEqual({
        probe,
        port: restPort,
        scheme,
      });
    }
    expect(gateway.livenessProbe.httpGet.path).toBe('/gateway/v1/health');
    expect(gateway.readinessProbe.httpGet.path).toBe('/gateway/v1/ready');
  });

  it('the JobManager binds loopback on another port through its entrypoint args, and that is what the gateway fronts', () => {
    const props = dynamicProperties(flinkConf['kubernetes.jobmanager.entrypoint.args'] ?? '');
    expect(props.get('rest.bind-address')).toBe('127.0.0.1');
    const jmPort = Number(props.get('rest.bind-port'));
    expect(jmPort).toBeGreaterThan(0);
    expect(jmPort).not.toBe(restPort);
    const target = new URL(loadGatewayConfig().config.getOptional(coreOptions.clusterRestUrl) ?? '');
    expect({ host: target.hostname, port: Number(target.port), protocol: target.protocol }).toEqual({
      host: '127.0.0.1',
      port: jmPort,
      protocol: 'http:',
    });
  });

  it("the gateway listens on the pod's interfaces: the pod IP for the Service, loopback for the JobManager's token bridge", () => {
    const env = (gateway.env as K8sObject[]).find((e) => e.name === envNameFor(coreOptions.restBindAddress.key));
    expect(env?.value).toBe('0.0.0.0');
  });

  it('the operator\'s startup probe (GET /config on the main container\'s "rest" port) reaches the gateway, over HTTPS when it listens TLS', () => {
    // The operator adds GET /config on the port named "rest" as plain HTTP, but only where the main
    // container has no startup probe; Flink declares "rest" (= rest.port) on the main container itself.
    const scheme = gatewayTls(loadGatewayConfig().config) ? 'HTTPS' : 'HTTP';
    if (scheme === 'HTTP') {
      expect(main.startupProbe).toBeUndefined();
    } else {
      expect(main.startupProbe.httpGet).toEqual({ path: '/config', port: 'rest', scheme: 'HTTPS' });
      expect(main.startupProbe.periodSeconds).toBe(1);
    }
    // So no container may claim that port name or number.
    for (const c of containers) {
      for (const p of (c.ports as K8sObject[] | undefined) ?? []) {
        expect({ container: c.name, port: p.name }).not.toEqual({ container: c.name, port: 'rest' });
        expect({ container: c.name, port: p.containerPort }).not.toEqual({ container: c.name, port: restPort });
      }
    }
  });

  it('authentication: the gateway would start (it refuses the pod IP with jar URIs on and no authentication), and the operator can authenticate (mutual TLS)', () => {
    const { config } = loadGatewayConfig();
    const auth = config.getOptional(coreOptions.authTokensFile) !== undefined || config.getOptional(coreOptions.tlsClientCa) !== undefined;
    expect(exposureProblem(config.get(coreOptions.restBindAddress), config.get(coreOptions.jarUriEnable), auth)).toBeUndefined();
    // The operator sends no bearer token on jar uploads: it needs mutual TLS, with REST SSL on for its
    // client (this cluster's configuration) and off for the JobManager's loopback endpoint.
    expect(config.getOptional(coreOptions.tlsClientCa)).toEqual(expect.any(String));
    expect(gatewayTls(config)).toBe(true);
    expect(flinkConf['security.ssl.rest.enabled']).toBe('true');
    expect(flinkConf['security.ssl.rest.authentication-enabled']).toBe('true');
    expect(dynamicProperties(flinkConf['kubernetes.jobmanager.entrypoint.args'] ?? '').get('security.ssl.rest.enabled')).toBe('false');
    expect(new URL(config.getOptional(coreOptions.clusterRestUrl) ?? '').protocol).toBe('http:');
  });

  it('TLS material: the files the gateway reads are in the mounted certificate Secret, whose certificate names the REST Service the operator dials', () => {
    const { config } = loadGatewayConfig();
    const tlsVolume = (jmPod.spec.volumes as K8sObject[]).find(
      (v) => v.secret?.secretName && v.secret.secretName !== secretVolume.secret.secretName,
    )!;
    const mount = mountOf(gateway, tlsVolume.name)!;
    expect(mount.readOnly).toBe(true);
    expect(mountOf(main, tlsVolume.name)).toBeUndefined();
    for (const file of [
      config.getOptional(coreOptions.tlsCert),
      config.getOptional(coreOptions.tlsKey),
      config.getOptional(coreOptions.tlsClientCa),
    ]) {
      expect({ file, dir: posix.dirname(file ?? '') }).toEqual({ file, dir: mount.mountPath });
      expect(['tls.crt', 'tls.key', 'ca.crt']).toContain(posix.basename(file ?? ''));
    }
    const cert = onlyOne(manifests, 'Certificate');
    expect(cert.spec.secretName).toBe(tlsVolume.secret.secretName);
    expect(cert.metadata.namespace).toBe(deployment.metadata.namespace);
    // The operator connects to <deploymentName>-rest.<namespace>. Flink's REST client does not check
    // the host name (test/e2e/java-client-tls.test.ts) — its truststore is the only check — but
    // other clients (curl, browsers) do. Flink's default cipher list needs an RSA server key.
    expect(cert.spec.dnsNames).toContain(`${deployment.metadata.name}-rest.${deployment.metadata.namespace}`);
    expect(cert.spec.usages).toContain('server auth');
    expect(cert.spec.privateKey?.algorithm).toBe('RSA');
  });

  it('web.upload.dir is the same path in both containers of both pods: one ReadWriteMany claim, so a jar uploaded to one JobManager runs on the other', () => {
    const { config } = loadGatewayConfig();
    const uploadDir = flinkConf['web.upload.dir']!;
    expect(config.getOptional(coreOptions.jobManagerUploadDir)).toBe(uploadDir);
    const mountFor = (c: K8sObject, path: string) =>
      ((c.volumeMounts as K8sObject[] | undefined) ?? [])
        .filter((m) => path === m.mountPath || path.startsWith(`${m.mountPath}/`))
        .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
    const jmMount = mountFor(main, uploadDir);
    const gwMount = mountFor(gateway, uploadDir);
    expect(jmMount).toBeDefined();
    expect(gwMount).toEqual(jmMount);
    // Not a per-pod emptyDir: the operator's upload and run may reach different JobManagers.
    expect(volume(jmMount!.name)?.emptyDir).toBeUndefined();
    const pvc = onlyOne(manifests, 'PersistentVolumeClaim', volume(jmMount!.name)?.persistentVolumeClaim?.claimName);
    expect(pvc.spec.accessModes).toEqual(['ReadWriteMany']);
    expect(pvc.metadata.namespace).toBe(deployment.metadata.namespace);
    expect(jmMount!.readOnly ?? false).toBe(false);
    // The jar cache is the pod's own (two gateways must not share one cache), on another filesystem:
    // hard links cannot cross it, so the hand-off is an upload.
    const cacheMount = mountFor(gateway, config.get(artifactOptions.cacheDir));
    expect(cacheMount).toBeDefined();
    expect(cacheMount).not.toEqual(gwMount);
    expect(volume(cacheMount!.name)?.emptyDir).toBeDefined();
    expect(config.get(artifactOptions.handoff)).toBe('upload');
  });

  it("both containers can write the shared volume: the gateway runs as the Flink image's uid 9999, the pod has fsGroup 9999, as in the Dockerfile", () => {
    const stages = parseDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8'));
    const user = stages
      .at(-1)!
      .instructions.filter((i) => i.keyword === 'USER')
      .at(-1)!.rest;
    const [uid, gid = uid] = user.split(':').map(Number);
    expect(gateway.securityContext.runAsUser).toBe(uid);
    expect(gateway.securityContext.runAsGroup).toBe(gid);
    expect(jmPod.spec.securityContext.fsGroup).toBe(gid);
    expect(uid).toBe(9999);
  });

  it('volumes: every mount has a volume; the ConfigMap is the --config file; the Secret is gateway.secrets.dir, optional and in the gateway container only', () => {
    // Plus the one Flink adds to the JobManager pod itself (FlinkConfMountDecorator, see FLINK_CONF_VOLUME).
    const names = new Set([...(jmPod.spec.volumes as K8sObject[]).map((v) => v.name), FLINK_CONF_VOLUME]);
    for (const c of containers)
      for (const m of c.volumeMounts ?? [])
        expect({ container: c.name, volume: m.name, defined: names.has(m.name) }).toEqual({
          container: c.name,
          volume: m.name,
          defined: true,
        });
    const configMount = mountOf(gateway, configVolume.name)!.mountPath;
    const configArg = (gateway.args as string[])[(gateway.args as string[]).indexOf('--config') + 1]!;
    expect(posix.dirname(configArg)).toBe(configMount);
    expect(Object.keys(configMap.data)).toContain(posix.basename(configArg));
    expect(configVolume.configMap.items).toBeUndefined();
    expect(gatewayYaml()[coreOptions.secretsDir.key]).toBe(mountOf(gateway, secretVolume.name)!.mountPath);
    expect(secretVolume.secret.optional).toBe(true);
    expect(mountOf(main, secretVolume.name)).toBeUndefined();
    // Each Secret volume is mounted by the gateway alone (the gateway-truststore init container reads
    // the TLS Secret's ca.crt, a public certificate).
    for (const v of (jmPod.spec.volumes as K8sObject[]).filter((x) => x.secret))
      expect({ volume: v.name, inMain: mountOf(main, v.name) !== undefined }).toEqual({ volume: v.name, inMain: false });
    expect(mountOf(gateway, secretVolume.name)!.readOnly).toBe(true);
    for (const m of [deployment, configMap, secret]) expect(m.metadata.namespace).toBe(deployment.metadata.namespace);
  });

  it("the NetworkPolicy admits only the operator and clients to rest.port, only this cluster's TaskManagers to RPC and blob, and only the other JobManager to RPC, blob and metric queries", () => {
    const policy = onlyOne(manifests, 'NetworkPolicy');
    const name = deployment.metadata.name as string;
    expect(policy.metadata.namespace).toBe(deployment.metadata.namespace);
    expect(policy.spec.podSelector.matchLabels).toEqual(flinkPodLabels(name, 'jobmanager'));
    expect(policy.spec.policyTypes).toContain('Ingress');
    const rules = policy.spec.ingress as K8sObject[];
    const portsOf = (r: K8sObject) => (r.ports as K8sObject[]).map((p) => Number(p.port)).sort();
    for (const r of rules) {
      // A rule without "from" (or an ipBlock) would admit everyone.
      expect(r.from?.length).toBeGreaterThan(0);
      for (const peer of r.from) expect(peer.ipBlock).toBeUndefined();
      expect(r.ports?.length).toBeGreaterThan(0);
    }
    const restRules = rules.filter((r) => portsOf(r).includes(restPort));
    expect(restRules).toHaveLength(1);
    expect(portsOf(restRules[0]!)).toEqual([restPort]);
    const rpcPorts = [Number(flinkConf['jobmanager.rpc.port']), Number(flinkConf['blob.server.port'])].sort();
    const tmRule = rules.find((r) => portsOf(r).join() === rpcPorts.join());
    expect(tmRule?.from).toEqual([{ podSelector: { matchLabels: flinkPodLabels(name, 'taskmanager') } }]);
    // HA: a standby JobManager's REST forwards to the leader's dispatcher over RPC — on
    // high-availability.jobmanager.port, the RPC port of an HA JobManager — uploads a run's jars to
    // the leader's blob server, and queries the leader's metric query service.
    const haRpcPort = Number(flinkConf['high-availability.jobmanager.port']);
    expect(haRpcPort).toBe(Number(flinkConf['jobmanager.rpc.port']));
    const jmPorts = [haRpcPort, Number(flinkConf['blob.server.port']), Number(flinkConf['metrics.internal.query-service.port'])].sort();
    expect(jmPorts.every((p) => p > 0)).toBe(true);
    const jmRules = rules.filter((r) => (r.from as K8sObject[]).some((peer) => peer.podSelector?.matchLabels?.component === 'jobmanager'));
    expect(jmRules).toHaveLength(1);
    expect(jmRules[0]!.from).toEqual([{ podSelector: { matchLabels: flinkPodLabels(name, 'jobmanager') } }]);
    expect(portsOf(jmRules[0]!)).toEqual(jmPorts);
    // Nothing else is open, in particular not the JobManager's own REST port.
    expect(rules.flatMap(portsOf).sort()).toEqual([restPort, ...rpcPorts, ...jmPorts].sort());
    // Egress stays open (ZooKeeper, the artifact stores); a policy that restricted it would need 2181.
    expect(policy.spec.policyTypes).not.toContain('Egress');
  });

  it('the pod-identity variant: annotated service accounts with the operator\'s "flink" Role bound to them', () => {
    const accounts = ofKind(manifests, 'ServiceAccount').map((m) => m.obj);
    const annotations = accounts.flatMap((a) => Object.keys(a.metadata.annotations ?? {}));
    expect(annotations).toEqual(expect.arrayContaining(['eks.amazonaws.com/role-arn', 'azure.workload.identity/client-id']));
    const binding = onlyOne(manifests, 'RoleBinding', 'flink-team-a-pod-identity');
    // The job Role the operator's Helm chart creates in each watched namespace (rbac.jobRole.name).
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'flink' });
    expect((binding.subjects as K8sObject[]).map((s) => s.name).sort()).toEqual(accounts.map((a) => a.metadata.name).sort());
  });
});

describe("HA: two JobManagers whose gateways share ConfigMaps in the cluster's namespace (Kubernetes HA, ADR 0012, ADR 0031)", () => {
  const name = deployment.metadata.name as string;

  it("the gateway mounts Flink's configuration volume read-only, and gateway.cluster.flink-conf is that mount", () => {
    const mount = mountOf(gateway, FLINK_CONF_VOLUME);
    expect(mount?.readOnly).toBe(true);
    // Flink adds the volume and its mount in the main container itself; declaring either in the
    // template would collide with Flink's.
    expect(volume(FLINK_CONF_VOLUME)).toBeUndefined();
    expect(mountOf(main, FLINK_CONF_VOLUME)).toBeUndefined();
    // The directory: the gateway finds config.yaml (Flink 2) or flink-conf.yaml (Flink 1) in it.
    expect(gatewayYaml()[CLUSTER_FLINK_CONF_KEY]).toBe(mount?.mountPath);
  });

  it("the gateway's store resolves to ConfigMaps of the cluster (its cluster-id, its namespace), with the pod's service account", () => {
    const { config, cluster } = loadGatewayConfig();
    expect(Object.fromEntries(cluster)).toEqual(operatorFlinkConfig(deployment));
    const store = haStoreOf(config.get(haOptions.store), Object.fromEntries(cluster));
    expect(store).toMatchObject({ kind: 'kubernetes', settings: { clusterId: name, namespace: deployment.metadata.namespace } });
    // No kubeconfig: in the pod the gateway uses the service account (the JobManager's).
    expect(Object.keys(flinkConf).filter((k) => k.startsWith('kubernetes.config.') || k === 'kubernetes.context')).toEqual([]);
    // auto picks the same store.
    expect(haStoreOf('auto', Object.fromEntries(cluster))).toEqual(store);
    // gateway.ha.store is explicit: a cluster configuration without Kubernetes HA stops the gateway
    // instead of leaving two gateways with a store each (control).
    expect(config.get(haOptions.store)).toBe('kubernetes');
    expect(() => haStoreOf(config.get(haOptions.store), { ...Object.fromEntries(cluster), 'high-availability.type': 'NONE' })).toThrow(
      /gateway.ha.store is kubernetes/,
    );
  });

  it("RBAC: a Role with exactly the store's verbs on configmaps (ADR 0031), bound to the JobManager's service account", () => {
    const role = onlyOne(manifests, 'Role', 'team-a-session-gateway-ha');
    expect(role.metadata.namespace).toBe(deployment.metadata.namespace);
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] },
    ]);
    const binding = onlyOne(manifests, 'RoleBinding', 'team-a-session-gateway-ha');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: deployment.spec.serviceAccount, namespace: deployment.metadata.namespace },
    ]);
  });

  it("the gateways' shared HA secret (ADR 0028) is a file from a Secret of its own: required, in the gateway container only, one key", () => {
    const file = gatewayYaml()['gateway.ha.shared-secret-file'] as string;
    const mount = (gateway.volumeMounts as K8sObject[]).find((m) => file.startsWith(`${m.mountPath}/`));
    expect(mount?.readOnly).toBe(true);
    const v = volume(mount!.name)!;
    // Not optional: without it the gateway would refuse to start, so the pod should not start.
    expect(v.secret.optional ?? false).toBe(false);
    expect(mountOf(main, v.name)).toBeUndefined();
    const haSecret = onlyOne(manifests, 'Secret', v.secret.secretName);
    expect(Object.keys({ ...haSecret.stringData, ...haSecret.data })).toEqual([file.slice(mount!.mountPath.length + 1)]);
    expect(haSecret.metadata.namespace).toBe(deployment.metadata.namespace);
  });

  it("no key of the cluster's Flink configuration changes the gateway's own options: the JobManager's own keys are not taken, and nothing else in it is a gateway option", () => {
    const { config, clusterKeys } = loadGatewayConfig();
    const conf = operatorFlinkConfig(deployment);
    // rest.port and web.upload.dir are in the file, and stay the gateway's own.
    expect(
      Object.keys(conf)
        .filter((k) => JOBMANAGER_OWN_KEYS.has(k))
        .sort(),
    ).toEqual(['rest.port', 'web.upload.dir']);
    expect(clusterKeys.filter((k) => JOBMANAGER_OWN_KEYS.has(k))).toEqual([]);
    // Everything else is kept for jobs and token providers but is no gateway option, e.g.
    // security.ssl.rest.* (the gateway's own HTTPS is gateway.tls.*, its client's gateway.cluster.*).
    // Except Flink's own token-framework keys (the retry backoff the bridge needs): they mean the same
    // to the gateway's framework and are shared on purpose (docs/security.md).
    const sharedOnPurpose = (k: string) => k.startsWith('security.delegation.tokens.');
    expect(clusterKeys.filter((k) => !sharedOnPurpose(k) && registry.lookup(k) !== undefined)).toEqual([]);
    expect(clusterKeys).toEqual(expect.arrayContaining(['security.ssl.rest.enabled', 'high-availability.type']));
    expect(config.get(coreOptions.restPort)).toBe(Number(flinkConf['rest.port']));
    expect(config.getOptional(coreOptions.jobManagerUploadDir)).toBe(gatewayYaml()[coreOptions.jobManagerUploadDir.key]);
  });

  it('high-availability.storageDir is a path on one ReadWriteMany claim mounted into the JobManager container (of both pods), not into the gateway', () => {
    const storageDir = new URL(flinkConf['high-availability.storageDir']!);
    expect(storageDir.protocol).toBe('file:');
    const mount = ((main.volumeMounts as K8sObject[] | undefined) ?? []).find(
      (m) => storageDir.pathname === m.mountPath || storageDir.pathname.startsWith(`${m.mountPath}/`),
    );
    expect(mount).toBeDefined();
    const claimName = volume(mount!.name)?.persistentVolumeClaim?.claimName;
    const pvc = onlyOne(manifests, 'PersistentVolumeClaim', claimName);
    expect(pvc.metadata.namespace).toBe(deployment.metadata.namespace);
    expect(pvc.spec.accessModes).toEqual(['ReadWriteMany']);
    expect(mount!.readOnly ?? false).toBe(false);
    expect(mountOf(gateway, mount!.name)).toBeUndefined();
  });

  it('the JobManagers prefer different nodes', () => {
    const terms = jmPod.spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution as K8sObject[];
    expect(terms?.map((t) => t.podAffinityTerm)).toEqual([
      { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: flinkPodLabels(name, 'jobmanager') } },
    ]);
  });
});

describe('the token bridge (token-bridge/README.md): its jar in lib/ of the JobManager and the TaskManagers, its secret, its keys', () => {
  const BRIDGE_JAR = 'flink-jar-gateway-token-bridge.jar';
  const tmPod = deployment.spec.taskManager.podTemplate as K8sObject;
  const podVolume = (pod: K8sObject, name: string) => (pod.spec.volumes as K8sObject[]).find((v) => v.name === name);
  const mainOf = (pod: K8sObject) => (pod.spec.containers as K8sObject[]).find((c) => c.name === MAIN_CONTAINER)!;

  it.each([
    ['JobManager', jmPod],
    ['TaskManager', tmPod],
  ] as const)(
    "%s: an init container from the gateway image copies the jar into a volume, mounted as one file into the stock image's lib/",
    (_who, pod) => {
      const init = (pod.spec.initContainers as K8sObject[]).find((c) => c.name === 'token-bridge')!;
      expect(init.image).toBe(gateway.image);
      const [cmd, from, to] = init.command as string[];
      expect(cmd).toBe('cp');
      expect(from).toBe(`/opt/token-bridge/${BRIDGE_JAR}`);
      const initMount = (init.volumeMounts as K8sObject[]).find((m) => posix.normalize(to!).replace(/\/$/, '') === m.mountPath)!;
      expect(podVolume(pod, initMount.name)?.emptyDir).toBeDefined();
      // lib/, not plugins/: job code reads the receiver's registry (a plugin class loader would hide it).
      const libMount = (mainOf(pod).volumeMounts as K8sObject[]).find((m) => m.name === initMount.name)!;
      expect(libMount).toMatchObject({ mountPath: `/opt/flink/lib/${BRIDGE_JAR}`, subPath: BRIDGE_JAR, readOnly: true });
      expect(init.securityContext.runAsUser).toBe(gateway.securityContext.runAsUser);
      expect(pod.spec.securityContext.fsGroup).toBe(gateway.securityContext.runAsGroup);
    },
  );

  it('the gateway creates the bridge secret on a volume the JobManager container reads it from (same path, same uid); not a Secret, and not in the TaskManagers', () => {
    const file = String(gatewayYaml()['gateway.tokens.bridge-secret-file']);
    expect(flinkConf['security.delegation.token.provider.gateway.secret-file']).toBe(file);
    const v = volumeOfFile(gateway, file)!;
    expect(volumeOfFile(main, file)).toBe(v);
    // The gateway refuses a bridge secret file it does not own (a Secret volume's files are root's
    // symlinks): it writes the file itself, and only the JobManager reads it.
    expect(volume(v)?.emptyDir).toBeDefined();
    expect(mountOf(gateway, v)!.readOnly ?? false).toBe(false);
    expect(mountOf(main, v)!.readOnly).toBe(true);
    // The Flink image's uid (9999) is the gateway's: the 0600 file is readable by the JobManager.
    expect(gateway.securityContext.runAsUser).toBe(9999);
    expect(((tmPod.spec.volumes as K8sObject[]) ?? []).some((x) => x.secret || x.name === v)).toBe(false);
  });

  it("the gateway's state lives in directories it creates below its mounts (a volume's root is not the gateway's own, and the gateway refuses such a directory)", () => {
    const { config } = loadGatewayConfig();
    const bridgeDir = posix.dirname(String(gatewayYaml()['gateway.tokens.bridge-secret-file']));
    const cacheDir = config.get(artifactOptions.cacheDir);
    const storeDir = String(gatewayYaml()['gateway.tokens.store-dir'] ?? posix.join(cacheDir, 'registrations'));
    for (const d of [bridgeDir, cacheDir, storeDir]) {
      const mount = ((gateway.volumeMounts as K8sObject[]) ?? []).find((m) => d.startsWith(`${m.mountPath}/`));
      expect({ dir: d, belowAMount: mount !== undefined }).toEqual({ dir: d, belowAMount: true });
      expect(((gateway.volumeMounts as K8sObject[]) ?? []).some((m) => m.mountPath === d)).toBe(false);
      expect(mount!.readOnly ?? false).toBe(false);
    }
  });

  it('the bridge pulls the gateway on loopback at rest.port, over HTTPS that its JVM trusts: the certificate names 127.0.0.1 and the truststore holds its CA', () => {
    const url = new URL(flinkConf['security.delegation.token.provider.gateway.url']!);
    const { config } = loadGatewayConfig();
    expect({ host: url.hostname, port: Number(url.port), protocol: url.protocol }).toEqual({
      host: '127.0.0.1',
      port: config.get(coreOptions.restPort),
      protocol: gatewayTls(config) ? 'https:' : 'http:',
    });
    const cert = onlyOne(manifests, 'Certificate');
    expect(cert.spec.ipAddresses).toContain('127.0.0.1');
    // The truststore: built by an init container from the JVM's own CAs plus the gateway certificate's CA.
    const opts = new Map(
      (flinkConf['env.java.opts.jobmanager'] ?? '')
        .split(/\s+/)
        .map((o) => /^-D([^=]+)=(.*)$/.exec(o))
        .filter((m) => m !== null)
        .map((m) => [m![1]!, m![2]!]),
    );
    const store = opts.get('javax.net.ssl.trustStore')!;
    expect(store).toBeDefined();
    const storeVolume = volumeOfFile(main, store)!;
    expect(volume(storeVolume)?.emptyDir).toBeDefined();
    const init = (jmPod.spec.initContainers as K8sObject[]).find((c) => c.name === 'gateway-truststore')!;
    expect(init.image).toBe(deployment.spec.image);
    const script = (init.command as string[]).join(' ');
    expect(script).toContain(store);
    expect(script).toContain('$JAVA_HOME/lib/security/cacerts');
    expect(script).toContain(`-storepass ${opts.get('javax.net.ssl.trustStorePassword')}`);
    const caMount = (init.volumeMounts as K8sObject[]).find((m) => script.includes(`${m.mountPath}/ca.crt`))!;
    expect(volume(caMount.name)?.secret).toMatchObject({ secretName: cert.spec.secretName, items: [{ key: 'ca.crt', path: 'ca.crt' }] });
    expect(volumeOfFile(init, store)).toBe(storeVolume);
  });

  it("Flink's retry backoff is the bridge's poll interval (10 s by default), not Flink's hour", () => {
    const poll = flinkConf['security.delegation.token.provider.gateway.poll-interval'] ?? '10 s';
    expect(flinkConf['security.delegation.tokens.renewal.retry.backoff']).toBe(poll);
  });
});
