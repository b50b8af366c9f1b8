import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import { parse } from 'yaml';
import { projectRoot } from '../../src/project-root';
import { runProcess } from '../helpers/run-process';
import { readZipEntries } from './zip';

/**
 * The schemas the Kubernetes examples are validated against, fetched with the registries' own
 * clients and cached under .tmp/ and target/ (both ignored by git):
 *
 * - the FlinkDeployment / FlinkSessionJob CRDs generated into `org.apache.flink:flink-kubernetes-operator-api`
 *   (Maven Central, through the module in test/deploy/operator-crds/);
 * - the core Kubernetes schemas (ConfigMap, Secret, NetworkPolicy, PodTemplateSpec, ...) as packaged by
 *   the PyPI package kubernetes-validate, "strict" flavour (unknown fields are errors, as with
 *   `kubectl apply --validate=strict`); read straight out of the wheel, nothing is installed.
 */

type Json = Record<string, unknown>;

const root = projectRoot(__dirname);
const CRD_MODULE = join(root, 'test', 'deploy', 'operator-crds');
const CACHE = join(root, '.tmp', 'deploy-schemas');

/** Pinned: the wheel holds schemas for many Kubernetes versions; these tests use one. */
export const K8S_SCHEMA_PACKAGE = { name: 'kubernetes-validate', version: '1.37.0' };
export const K8S_VERSION = 'v1.33.0';
const K8S_DEFINITIONS_ID = 'https://kubernetes.io/api/_definitions.json';
const OBJECT_META_REF = `${K8S_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`;

export function operatorApiVersion(): string {
  const m = /<flink-operator\.version>([^<]+)<\/flink-operator\.version>/.exec(readFileSync(join(CRD_MODULE, 'pom.xml'), 'utf8'));
  if (!m) throw new Error('test/deploy/operator-crds/pom.xml has no <flink-operator.version>');
  return m[1]!;
}

/** The CRDs (apiextensions.k8s.io/v1 flavour) of the operator API jar, by `spec.names.kind`. */
export async function loadOperatorCrds(): Promise<Map<string, Json>> {
  const jar = join(CRD_MODULE, 'target', 'flink-kubernetes-operator-api.jar');
  // Maven copies again only when the version in the pom changed; a warm run takes a few seconds.
  const r = await runProcess('mvn', ['-q', '-B', '-f', join(CRD_MODULE, 'pom.xml'), 'dependency:copy@operator-api'], {
    timeoutMs: 240_000,
  });
  if (r.status !== 0 || !existsSync(jar)) {
    throw new Error(
      `could not fetch flink-kubernetes-operator-api ${operatorApiVersion()} with Maven (exit ${r.status}):\n${r.stdout}${r.stderr}`,
    );
  }
  const entries = await readZipEntries(jar, (n) => /^META-INF\/fabric8\/[^/]+-v1\.yml$/.test(n));
  const crds = new Map<string, Json>();
  for (const [, buf] of entries) {
    const crd = parse(buf.toString('utf8')) as { spec: { names: { kind: string } } };
    crds.set(crd.spec.names.kind, crd as unknown as Json);
  }
  return crds;
}

/** Core Kubernetes object schemas of K8S_VERSION, by `<group>/<version>/<kind>` (group "" for the core group). */
export async function loadCoreSchemas(): Promise<{ definitions: Json; byGvk: Map<string, Json> }> {
  const wheel = await ensureWheel();
  const dir = `kubernetes_validate/kubernetes-json-schema/${K8S_VERSION}-local-strict/`;
  const entries = await readZipEntries(wheel, (n) => n.startsWith(dir) && n.endsWith('.json') && !n.endsWith('/all.json'));
  const defs = entries.get(`${dir}_definitions.json`);
  if (!defs) throw new Error(`${wheel} has no ${dir}_definitions.json`);
  const byGvk = new Map<string, Json>();
  for (const [name, buf] of entries) {
    if (name.endsWith('/_definitions.json')) continue;
    const schema = JSON.parse(buf.toString('utf8')) as Json;
    for (const gvk of (schema['x-kubernetes-group-version-kind'] as { group: string; version: string; kind: string }[] | undefined) ?? []) {
      const key = `${gvk.group}/${gvk.version}/${gvk.kind}`;
      // The per-kind file (e.g. networkpolicy-networking-v1.json) rather than a list or a sub-schema.
      if (
        !byGvk.has(key) ||
        name.endsWith(`/${gvk.kind.toLowerCase()}${gvk.group ? `-${gvk.group.split('.')[0]}` : ''}-${gvk.version}.json`)
      )
        byGvk.set(key, schema);
    }
    const id = String(schema.$id ?? '');
    if (id.endsWith('/podtemplatespec/v1')) byGvk.set('/v1/PodTemplateSpec', schema);
  }
  return { definitions: JSON.parse(defs.toString('utf8')) as Json, byGvk };
}

async function ensureWheel(): Promise<string> {
  mkdirSync(CACHE, { recursive: true });
  const { name, version } = K8S_SCHEMA_PACKAGE;
  const pattern = new RegExp(`^${name.replace(/-/g, '_')}-${version.replace(/\./g, '\\.')}-.*\\.whl$`);
  const find = () => readdirSync(CACHE).find((f) => pattern.test(f));
  let file = find();
  if (!file) {
    // The project's virtualenv (made by scripts/test-setup.sh) has pip; otherwise the system Python's.
    const venvPip = join(root, '.tmp', 'venv', 'bin', 'pip');
    const [cmd, pre] = existsSync(venvPip) ? [venvPip, []] : ['python3', ['-m', 'pip']];
    const r = await runProcess(
      cmd,
      [
        ...pre,
        'download',
        '--no-deps',
        '--only-binary=:all:',
        '--disable-pip-version-check',
        '--no-input',
        '-d',
        CACHE,
        `${name}==${version}`,
      ],
      {
        timeoutMs: 240_000,
      },
    );
    file = find();
    if (r.status !== 0 || !file)
      throw new Error(`could not download ${name}==${version} from PyPI (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  }
  return join(CACHE, file);
}

/**
 * Turns a CRD's openAPIV3Schema into a JSON Schema for whole objects: apiVersion and kind fixed,
 * metadata as Kubernetes' ObjectMeta, and every object with declared properties closed to unknown
 * fields unless it says `x-kubernetes-preserve-unknown-fields` (the API server would prune them
 * silently; `kubectl apply` with strict field validation rejects them, and either way they are typos).
 * `x-kubernetes-*` keywords stay in place: ajv runs with strict: false and ignores them.
 */
export function crdToJsonSchema(crd: Json, version: string): Json {
  const spec = crd.spec as { group: string; names: { kind: string }; versions: { name: string; schema: { openAPIV3Schema: Json } }[] };
  const v = spec.versions.find((x) => x.name === version);
  if (!v) throw new Error(`CRD ${spec.names.kind} has no version ${version}`);
  const schema = closeObjects(structuredClone(v.schema.openAPIV3Schema));
  const props = schema.properties as Json;
  return {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    additionalProperties: false,
    properties: {
      apiVersion: { const: `${spec.group}/${version}` },
      kind: { const: spec.names.kind },
      metadata: { $ref: OBJECT_META_REF },
      spec: props.spec,
      status: props.status,
    },
  };
}

function closeObjects(node: Json): Json {
  if (node.properties && node.additionalProperties === undefined && node['x-kubernetes-preserve-unknown-fields'] !== true)
    node.additionalProperties = false;
  for (const value of Object.values(node)) {
    if (Array.isArray(value)) {
      for (const item of value) if (item && typeof item === 'object') closeObjects(item as Json);
    } else if (value && typeof value === 'object') {
      closeObjects(value as Json);
    }
  }
  return node;
}

/** One ajv holding the core definitions, so CRD and core schemas can both use ObjectMeta etc. */
export function createValidatorFactory(definitions: Json): (schema: Json) => ValidateFunction {
  // strict: false — the schemas carry x-kubernetes-* and OpenAPI keywords ajv does not know, and
  // union types; formats (int32, byte, ...) are OpenAPI's, not JSON Schema's, so they are not checked.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema(definitions);
  return (schema) => ajv.compile(schema);
}

export function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`).join('\n');
}
