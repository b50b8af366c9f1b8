/** The Kubernetes HA settings of the cluster's Flink configuration (its `kubernetes.*` and `high-availability.kubernetes.*` keys). */
export interface KubernetesHaSettings {
  /** `kubernetes.cluster-id`: Flink's ConfigMaps are `<cluster-id>-cluster-config-map`, `<cluster-id>-<jobId>-config-map`. */
  clusterId: string;
  /** `kubernetes.namespace` (Flink's default: `default`). */
  namespace: string;
  /** `kubernetes.config.file` and `kubernetes.context`: a kubeconfig instead of the pod's service account. */
  configFile?: string;
  context?: string;
  /** Flink's leader-election timings (`high-availability.kubernetes.leader-election.*`): the gateway steps down as its JobManager does. */
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** The ConfigMap of Flink's leader election and leader records (one per cluster). */
export function clusterConfigMapName(clusterId: string): string {
  return `${clusterId}-cluster-config-map`;
}

/** The data key of a component's leader record in that ConfigMap: `<leaderSessionId>,<address>`. */
export const LEADER_KEY_PREFIX = 'org.apache.flink.k8s.leader.';

/**
 * The labels Flink gives its HA ConfigMaps, and the operator deletes a session cluster's ConfigMaps
 * by: the gateway's objects carry them too, so they go away with the cluster.
 */
export function flinkClusterLabels(clusterId: string): Record<string, string> {
  return { app: clusterId, type: 'flink-native-kubernetes' };
}
