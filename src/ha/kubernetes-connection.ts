import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { KubernetesConnection } from './kubernetes-client';

/** A pod's service account, mounted by Kubernetes (the JobManager pod's, which a sidecar shares). */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface ConnectionSources {
  /** `kubernetes.config.file` of the cluster's Flink configuration. */
  configFile?: string;
  /** `kubernetes.context`. */
  context?: string;
  env?: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
}

/**
 * Where the API server is and who the gateway is there, resolved as Flink's JobManager resolves it
 * (fabric8's auto-configuration), so the sidecar uses the JobManager's own identity: the kubeconfig
 * `kubernetes.config.file` names; else `$KUBECONFIG` or `~/.kube/config` when present; else the
 * pod's service account (`KUBERNETES_SERVICE_HOST`/`_PORT`, its token and CA). Throws one line
 * saying what is missing.
 */
export function resolveConnection(src: ConnectionSources): KubernetesConnection {
  const env = src.env ?? process.env;
  if (src.configFile) return fromKubeconfig(src.configFile, src.context);
  const kubeconfig =
    env.KUBECONFIG?.split(':').find((f) => f && existsSync(f)) ?? [join(homedir(), '.kube', 'config')].find((f) => existsSync(f));
  if (kubeconfig) return fromKubeconfig(kubeconfig, src.context);
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  const dir = src.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  if (host && existsSync(join(dir, 'token'))) {
    const ca = join(dir, 'ca.crt');
    return {
      server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
      tokenFile: join(dir, 'token'),
      ...(existsSync(ca) ? { ca: readFileSync(ca, 'utf8') } : {}),
      source: "the pod's service account",
    };
  }
  throw new Error(
    "no Kubernetes API server to reach: set kubernetes.config.file in the cluster's Flink configuration, or run the gateway in the JobManager pod (its service account), or provide $KUBECONFIG / ~/.kube/config",
  );
}

interface Kubeconfig {
  'current-context'?: string;
  clusters?: { name: string; cluster?: Record<string, unknown> }[];
  users?: { name: string; user?: Record<string, unknown> }[];
  contexts?: { name: string; context?: { cluster?: string; user?: string; namespace?: string } }[];
}

/** A kubeconfig's context (default: its current one) as a connection; token and client-certificate users only. */
export function fromKubeconfig(file: string, context?: string): KubernetesConnection {
  let doc: Kubeconfig;
  try {
    doc = parseYaml(readFileSync(file, 'utf8')) as Kubeconfig;
  } catch (err) {
    throw new Error(`cannot read the kubeconfig ${file}: ${(err as Error).message}`);
  }
  const name = context ?? doc['current-context'];
  const ctx = doc.contexts?.find((c) => c.name === name)?.context;
  if (!ctx)
    throw new Error(
      `the kubeconfig ${file} has no context ${name ? `"${name}"` : '(no current-context, and kubernetes.context is not set)'}`,
    );
  const cluster = doc.clusters?.find((c) => c.name === ctx.cluster)?.cluster;
  if (!cluster || typeof cluster.server !== 'string')
    throw new Error(`the kubeconfig ${file}'s context "${name}" names no cluster with a server`);
  const user = doc.users?.find((u) => u.name === ctx.user)?.user ?? {};
  // Relative file names in a kubeconfig are relative to the kubeconfig's own directory.
  const path = (p: unknown) => (typeof p === 'string' ? (isAbsolute(p) ? p : resolve(dirname(file), p)) : undefined);
  const pem = (data: unknown, ref: unknown) =>
    typeof data === 'string' ? Buffer.from(data, 'base64').toString('utf8') : path(ref) ? readFileSync(path(ref)!, 'utf8') : undefined;
  if (user.exec || user['auth-provider'])
    throw new Error(
      `the kubeconfig ${file}'s user "${ctx.user}" authenticates through an exec or auth-provider plugin, which the gateway does not run: use a token, a token file or a client certificate (a service account's token, for instance)`,
    );
  const ca = pem(cluster['certificate-authority-data'], cluster['certificate-authority']);
  const cert = pem(user['client-certificate-data'], user['client-certificate']);
  const key = pem(user['client-key-data'], user['client-key']);
  const tokenFile = path(user.tokenFile);
  return {
    server: cluster.server.replace(/\/+$/, ''),
    ...(ca ? { ca } : {}),
    ...(cluster['insecure-skip-tls-verify'] === true ? { insecureSkipTlsVerify: true } : {}),
    ...(typeof user.token === 'string' ? { token: user.token } : tokenFile ? { tokenFile } : {}),
    ...(cert && key ? { cert, key } : {}),
    source: `kubeconfig ${file} context "${name}"`,
  };
}
