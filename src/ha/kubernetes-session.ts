import type { Logger } from 'pino';
import { KubernetesClient, kubeError } from './kubernetes-client';
import { resolveConnection } from './kubernetes-connection';
import type { KubernetesHaSettings } from './kubernetes-settings';

/**
 * The ConfigMap verbs the gateway uses in the cluster's namespace, and nothing else: get and watch
 * (Flink's leader ConfigMap, the registrations), list (registrations, claims to prune), create
 * (registrations, claims), update (a registration rewritten), delete (a rolled-back or finished
 * registration, a released or expired claim). Flink's JobManager has these and `patch`.
 */
export const REQUIRED_CONFIGMAP_VERBS = ['get', 'list', 'watch', 'create', 'update', 'delete'] as const;

/** A start-up failure: the gateway's identity lacks ConfigMap verbs it needs (exit 2: fix RBAC, start again). */
export class KubernetesForbiddenError extends Error {
  readonly code = 'GW_HA_STORE_FORBIDDEN';
  constructor(
    readonly missing: readonly string[],
    namespace: string,
    source: string,
  ) {
    super(
      `the gateway's Kubernetes identity (${source}) may not ${missing.join(', ')} ConfigMaps in namespace ${namespace}; the gateway needs ${REQUIRED_CONFIGMAP_VERBS.join(', ')} on configmaps there (a Role with rules: [{apiGroups: [""], resources: [configmaps], verbs: [${REQUIRED_CONFIGMAP_VERBS.join(', ')}]}], bound to the JobManager pod's service account, which Flink's JobManager needs anyway)`,
    );
    this.name = 'KubernetesForbiddenError';
  }
}

/**
 * The gateway's connection to the Kubernetes API server for one cluster: the client every
 * Kubernetes HA piece shares, and the start-up check of its permissions.
 */
export class KubernetesSession {
  readonly client: KubernetesClient;

  constructor(
    readonly settings: KubernetesHaSettings,
    private readonly log: Logger,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.client = new KubernetesClient(
      resolveConnection({
        ...(settings.configFile ? { configFile: settings.configFile } : {}),
        ...(settings.context ? { context: settings.context } : {}),
        env,
      }),
    );
  }

  /**
   * Checks that the gateway may do what it needs (a SelfSubjectAccessReview per verb): a missing
   * verb rejects with KubernetesForbiddenError, which stops start-up with the verbs named. An API
   * server out of reach rejects with its error: the gateway starts as a standby, and runs answer
   * 503 until it answers.
   */
  async start(): Promise<void> {
    const { namespace } = this.settings;
    const missing: string[] = [];
    for (const verb of REQUIRED_CONFIGMAP_VERBS) {
      const allowed = await this.client.mayConfigMaps(namespace, verb);
      if (allowed === false) missing.push(verb);
    }
    if (missing.length > 0) throw new KubernetesForbiddenError(missing, namespace, this.client.connection.source);
    this.log.info(
      { server: this.client.connection.server, namespace, identity: this.client.connection.source },
      "Kubernetes API server reached; the gateway may use ConfigMaps in the cluster's namespace",
    );
  }

  close(): void {
    void this.client.close().catch(() => undefined);
  }
}

/** Whether `err` is a missing permission (a 403 from the API server, or the start-up check's finding). */
export function isForbidden(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'GW_HA_STORE_FORBIDDEN' || kubeError(err)?.status === 403;
}
