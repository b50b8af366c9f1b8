import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { FLINK_CONF_VOLUME, type K8sObject, loadManifests, ofKind, onlyOne, operatorFlinkConfig } from './manifests';
import { issueCert, makeTestCa } from '../servers/tls';

/** The gateway sidecar of examples/kubernetes as a local process's arguments, environment and files. */
export interface ExampleSidecar {
  args: string[];
  env: Record<string, string>;
  /** The CA of the gateway's server certificate (and of the operator's client certificate). */
  ca: string;
  /** A client certificate as the operator presents it (CN=flink-operator). */
  operator: { cert: string; key: string };
  /** Each of the sidecar's mount paths → the local directory standing in for it. */
  mounts: Map<string, string>;
  /** Rewrites the pod's paths (any of the sidecar's mount paths) in `text` to the local directories. */
  remap(text: string): string;
}

export interface ExampleSidecarOptions {
  /**
   * Local directories for some of the pod's volumes, by volume name: what two pods share (the
   * ReadWriteMany claim, a Secret mounted into both), or a volume filled elsewhere. A directory that is
   * empty is filled as it would be otherwise (TLS material, a Secret's files).
   */
  volumes?: ReadonlyMap<string, string>;
  /** The directory holding the cluster's config.yaml (Flink's configuration volume); else written from the FlinkDeployment as the operator would. */
  flinkConfDir?: string;
}

/** Every local address a pod address stands for: a test binds loopback only. */
function localAddress(e: K8sObject): string {
  if (e.valueFrom?.fieldRef?.fieldPath === 'status.podIP') return '127.0.0.1';
  return e.value === '0.0.0.0' ? '127.0.0.1' : String(e.value);
}

/**
 * The gateway sidecar of examples/kubernetes as a local process: its args and environment, every
 * volume it mounts mapped to a local directory (the ConfigMap's file, the Secret's files, the
 * emptyDirs and claims, Flink's configuration volume with the cluster's config.yaml), and throwaway
 * TLS material in place of cert-manager's: a CA, a server certificate (naming 127.0.0.1, as the
 * example's Certificate does) and an operator client certificate it signed. Binds 127.0.0.1 instead
 * of the pod's interfaces.
 */
export function kubernetesExample(dir: string, opts: ExampleSidecarOptions = {}): ExampleSidecar {
  const manifests = loadManifests();
  const deployment = onlyOne(manifests, 'FlinkDeployment');
  const pod = deployment.spec.jobManager.podTemplate.spec as K8sObject;
  const sidecar = (pod.containers as K8sObject[]).find((c) => c.name === 'flink-jar-gateway')!;
  const local = new Map<string, string>();
  const written: string[] = [];
  const declaredSecret = (name: string) => ofKind(manifests, 'Secret').some((m) => m.obj.metadata?.name === name);
  for (const m of sidecar.volumeMounts as K8sObject[]) {
    if (m.name === FLINK_CONF_VOLUME && opts.flinkConfDir) {
      local.set(m.mountPath, opts.flinkConfDir);
      continue;
    }
    const target = opts.volumes?.get(m.name) ?? join(dir, m.name);
    mkdirSync(target, { recursive: true });
    local.set(m.mountPath, target);
    if (readdirSync(target).length > 0) continue;
    // Added to the pod by Flink, not declared in the template.
    if (m.name === FLINK_CONF_VOLUME) {
      writeFileSync(join(target, 'config.yaml'), stringify(operatorFlinkConfig(deployment)));
      written.push(target);
      continue;
    }
    const volume = (pod.volumes as K8sObject[]).find((v) => v.name === m.name)!;
    if (volume.configMap) {
      const cm = onlyOne(manifests, 'ConfigMap', volume.configMap.name);
      for (const [k, v] of Object.entries(cm.data as Record<string, string>)) writeFileSync(join(target, k), v);
      written.push(target);
    } else if (volume.secret && declaredSecret(volume.secret.secretName)) {
      // A Secret the example ships (credentials, the HA store's shared secret, the bridge's): its files as written.
      const s = onlyOne(manifests, 'Secret', volume.secret.secretName);
      for (const [k, v] of Object.entries(s.stringData as Record<string, string>)) writeFileSync(join(target, k), v);
    } else if (volume.secret) {
      // The TLS Secret cert-manager makes from the example's Certificate.
      makeTls(target);
    }
  }
  // One pass, longest mount path first (so /a/b is not read as /a, and no result is rewritten again).
  const mounts = [...local.keys()].sort((a, b) => b.length - a.length);
  const pattern = new RegExp(`(?<![\\w.-])(${mounts.map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})(?=/|$|\\s)`, 'gm');
  const remap = (text: string) => text.replace(pattern, (m) => local.get(m)!);
  // The YAML files the helper wrote (gateway.yaml, config.yaml) name the pod's paths.
  for (const target of written)
    for (const f of readdirSync(target))
      if (f.endsWith('.yaml')) writeFileSync(join(target, f), remap(readFileSync(join(target, f), 'utf8')));
  const env: Record<string, string> = {};
  for (const e of sidecar.env as K8sObject[]) env[e.name] = localAddress(e);
  const tlsMount = (sidecar.volumeMounts as K8sObject[]).find((m) =>
    (pod.volumes as K8sObject[]).find((v) => v.name === m.name && v.secret && !declaredSecret(v.secret.secretName)),
  )!;
  const tls = local.get(tlsMount.mountPath)!;
  return {
    args: (sidecar.args as string[]).map(remap),
    env,
    ca: readFileSync(join(tls, 'ca.crt'), 'utf8'),
    operator: { cert: readFileSync(join(tls, 'operator.crt'), 'utf8'), key: readFileSync(join(tls, 'operator.key'), 'utf8') },
    mounts: local,
    remap,
  };
}

/**
 * tls.crt/tls.key (for localhost and 127.0.0.1 and the Service's name), ca.crt, and operator.crt/.key
 * (client CN=flink-operator): the files cert-manager's Secrets hold, with the names they have there.
 */
export function makeTls(dir: string): void {
  if (existsSync(join(dir, 'ca.crt'))) return;
  const ca = makeTestCa(dir, 'flink-rest');
  const serving = issueCert(dir, ca, 'tls', {
    cn: 'team-a-session-rest.team-a',
    use: 'server+client',
    altNames: 'DNS:team-a-session-rest.team-a,DNS:localhost,IP:127.0.0.1',
  });
  const operator = issueCert(dir, ca, 'operator', { cn: 'flink-operator', use: 'client' });
  for (const [files, name] of [
    [ca, 'ca'],
    [serving, 'tls'],
    [operator, 'operator'],
  ] as const) {
    renameSync(files.cert, join(dir, `${name}.crt`));
    renameSync(files.key, join(dir, `${name}.key`));
  }
}
