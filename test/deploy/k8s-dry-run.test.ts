import { KubeApiServer } from '../servers/kube-apiserver';
import { type K8sObject, label, loadManifests, type Manifest } from './manifests';
import { loadOperatorCrds, operatorApiVersion } from './schemas';

/** As k8s-manifests.test.ts: the served operator-api CRD stops at v1_20; the examples need v2_1. */
const FLINK_VERSIONS_NEWER_THAN_CRD = ['v2_0', 'v2_1'];
/** cert-manager's CRD is in no registry reachable here: its Certificate keeps the offline schema check. */
const NO_CRD_HERE = new Set(['cert-manager.io/v1/Certificate']);

/** The REST collection of a manifest's kind in its namespace. */
function collectionOf(obj: K8sObject): string {
  const [group, version] = String(obj.apiVersion).includes('/') ? String(obj.apiVersion).split('/') : ['', String(obj.apiVersion)];
  const plural = {
    ConfigMap: 'configmaps',
    Secret: 'secrets',
    ServiceAccount: 'serviceaccounts',
    NetworkPolicy: 'networkpolicies',
    PersistentVolumeClaim: 'persistentvolumeclaims',
    FlinkDeployment: 'flinkdeployments',
    FlinkSessionJob: 'flinksessionjobs',
    Role: 'roles',
    RoleBinding: 'rolebindings',
  }[String(obj.kind)];
  if (!plural) throw new Error(`no REST collection known for ${obj.kind}`);
  const ns = obj.metadata?.namespace ?? 'default';
  return group ? `/apis/${group}/${version}/namespaces/${ns}/${plural}` : `/api/${version}/namespaces/${ns}/${plural}`;
}

/**
 * Every manifest of examples/kubernetes/ whose kind the API server can know passes the real API
 * server's own validation (`dryRun=All`: admission and schema, nothing stored), with the Flink
 * Kubernetes Operator's CRDs installed from its API jar (the one the offline manifest test reads).
 */
describe('examples/kubernetes/ on a real kube-apiserver (server-side dry run, the operator CRDs installed)', () => {
  let kube: KubeApiServer;
  const manifests = loadManifests().filter((m) => !NO_CRD_HERE.has(`${m.obj.apiVersion}/${m.obj.kind}`));

  beforeAll(async () => {
    const [crds, server] = await Promise.all([loadOperatorCrds(), KubeApiServer.start()]);
    kube = server;
    for (const ns of new Set(manifests.map((m) => m.obj.metadata?.namespace ?? 'default'))) await kube.createNamespace(ns);
    for (const kind of ['FlinkDeployment', 'FlinkSessionJob']) {
      const crd = JSON.parse(JSON.stringify(crds.get(kind))) as K8sObject;
      if (!crd) throw new Error(`flink-kubernetes-operator-api ${operatorApiVersion()} has no ${kind} CRD`);
      if (kind === 'FlinkDeployment') {
        for (const v of crd.spec.versions as K8sObject[]) {
          const fv = v.schema.openAPIV3Schema.properties.spec.properties.flinkVersion;
          fv.enum = [...fv.enum, ...FLINK_VERSIONS_NEWER_THAN_CRD.filter((x) => !fv.enum.includes(x))];
        }
      }
      delete crd.status;
      const r = await kube.api('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
      if (r.status !== 201) throw new Error(`cannot install the ${kind} CRD: ${JSON.stringify(r.body).slice(0, 500)}`);
    }
    // A CRD serves its resources once it is Established.
    for (const name of ['flinkdeployments.flink.apache.org', 'flinksessionjobs.flink.apache.org']) {
      for (let i = 0; ; i++) {
        const r = await kube.api('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
        const conditions = ((r.body as K8sObject).status?.conditions ?? []) as { type: string; status: string }[];
        if (conditions.some((c) => c.type === 'Established' && c.status === 'True')) break;
        if (i > 300) throw new Error(`${name} not established`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  }, 300_000);

  afterAll(async () => {
    await kube?.stop();
  });

  it('covers every kind but the one without a CRD here', () => {
    expect([...new Set(manifests.map((m) => m.obj.kind))].sort()).toEqual(
      expect.arrayContaining([
        'ConfigMap',
        'FlinkDeployment',
        'FlinkSessionJob',
        'NetworkPolicy',
        'PersistentVolumeClaim',
        'Role',
        'RoleBinding',
        'Secret',
        'ServiceAccount',
      ]),
    );
  });

  it.each(manifests.map((m) => [label(m), m] as [string, Manifest]))(
    '%s is accepted by the API server (dryRun=All)',
    async (_name, m) => {
      const r = await kube.api('POST', collectionOf(m.obj), m.obj, '?dryRun=All&fieldValidation=Strict');
      if (r.status !== 201)
        throw new Error(`${label(m)}: HTTP ${r.status} ${JSON.stringify((r.body as K8sObject | undefined)?.message ?? r.body)}`);
      expect(r.status).toBe(201);
    },
    60_000,
  );
});
