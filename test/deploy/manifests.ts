import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { projectRoot } from '../../src/project-root';

/** A Kubernetes object as read from YAML; fields are reached through the helpers below. */
// biome-ignore lint/suspicious/noExplicitAny: manifests are arbitrary YAML; the schemas check their shape.
export type K8sObject = Record<string, any>;

export interface Manifest {
  file: string;
  index: number;
  obj: K8sObject;
}

export const EXAMPLES_DIR = join(projectRoot(__dirname), 'examples', 'kubernetes');

/** Every document of every *.yaml / *.yml file in examples/kubernetes/. YAML errors and duplicate keys throw. */
export function loadManifests(dir: string = EXAMPLES_DIR): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()) {
    const docs = parseAllDocuments(readFileSync(join(dir, file), 'utf8'), { uniqueKeys: true });
    docs.forEach((doc, index) => {
      if (doc.errors.length > 0) throw new Error(`${file} document ${index}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const obj = doc.toJS() as K8sObject | null;
      if (obj) out.push({ file, index, obj });
    });
  }
  return out;
}

export function label(m: Manifest): string {
  return `${m.file}#${m.index} ${m.obj.kind}/${m.obj.metadata?.name}`;
}

export function ofKind(manifests: Manifest[], kind: string): Manifest[] {
  return manifests.filter((m) => m.obj.kind === kind);
}

export function onlyOne(manifests: Manifest[], kind: string, name?: string): K8sObject {
  const found = ofKind(manifests, kind).filter((m) => name === undefined || m.obj.metadata?.name === name);
  if (found.length !== 1)
    throw new Error(`expected exactly one ${kind}${name ? ` named ${name}` : ''} in examples/kubernetes, found ${found.length}`);
  return found[0]!.obj;
}

/**
 * The volume Flink adds to a native-mode JobManager pod with the cluster's Flink configuration
 * (config.yaml for Flink 2, flink-conf.yaml before): `Constants.FLINK_CONF_VOLUME` of flink-kubernetes,
 * added by `FlinkConfMountDecorator` (the operator ships its own copy of that decorator, with the same
 * volume) from the ConfigMap `flink-config-<cluster-id>`, and mounted into the main container at
 * `kubernetes.flink.conf.dir` (/opt/flink/conf). It is not in the pod template: a sidecar mounts it
 * without declaring it.
 */
export const FLINK_CONF_VOLUME = 'flink-config-volume';

/**
 * The cluster's Flink configuration as the operator writes it into that volume, as far as the
 * gateway cares: the FlinkDeployment's flinkConfiguration plus `high-availability.cluster-id` and
 * `kubernetes.cluster-id` (the deployment's name) and `kubernetes.namespace` (its namespace), which
 * the operator sets itself.
 */
export function operatorFlinkConfig(deployment: K8sObject): Record<string, string> {
  return {
    ...(deployment.spec.flinkConfiguration as Record<string, string>),
    'high-availability.cluster-id': deployment.metadata.name,
    'kubernetes.cluster-id': deployment.metadata.name,
    'kubernetes.namespace': deployment.metadata.namespace,
  };
}

/** `-Dkey=value` pairs of a whitespace-separated argument string (as Flink's entrypoint reads them). */
export function dynamicProperties(args: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const a of args.trim().split(/\s+/)) {
    const m = /^-D([^=]+)=(.*)$/.exec(a);
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}
