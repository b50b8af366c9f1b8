import { type OptionDef, option, parseDuration } from '../config/types';
import type { ZooKeeperSettings } from './zookeeper';

const section = 'High availability';

export const haOptions = {
  store: option({
    key: 'gateway.ha.store', type: 'enum', default: 'auto', values: ['auto', 'local', 'zookeeper'], section,
    description: "Where job registrations and job-id claims live (docs/adr/0012-ha-gateways-follow-flinks-leader.md). auto: in the cluster's ZooKeeper when its Flink configuration (gateway.cluster.flink-conf) sets high-availability.type: zookeeper — the gateways of all JobManagers then act as one, and only the leading JobManager's gateway obtains tokens — else in gateway.tokens.store-dir. local: always gateway.tokens.store-dir (one gateway only; with several JobManagers each gateway would be an island). zookeeper: the cluster's ZooKeeper, and start-up fails without its settings. Kubernetes HA (high-availability.type: kubernetes) has no shared store yet: auto refuses to start with it, local runs one gateway as an island.",
  }),
} satisfies Record<string, OptionDef>;

/** What `gateway.ha.store` resolves to for this cluster. */
export type HaStore = { kind: 'local' } | { kind: 'zookeeper'; settings: ZooKeeperSettings };

/** Flink's normalisation of a ZooKeeper path (ZooKeeperUtils.generateZookeeperPath): one leading slash, no trailing or double ones. */
function zkPath(...parts: string[]): string {
  const joined = parts.map((p) => p.replace(/^\/+|\/+$/g, '')).filter(Boolean).join('/');
  return `/${joined.replace(/\/+/g, '/')}`;
}

/**
 * The shared store from `gateway.ha.store` and the cluster's own Flink configuration. Throws a
 * one-line reason when HA is asked for and cannot be served (a start-up configuration problem).
 */
export function haStoreOf(mode: string, cluster: Readonly<Record<string, string>>): HaStore {
  if (mode === 'local') return { kind: 'local' };
  const type = (cluster['high-availability.type'] ?? cluster['high-availability'] ?? 'NONE').trim().toLowerCase();
  if (type === 'kubernetes') {
    if (mode === 'auto') {
      throw new Error("the cluster's Flink configuration sets high-availability.type: kubernetes, for which the gateways have no shared store yet (ADR 0012): use ZooKeeper HA, or set gateway.ha.store: local with one JobManager replica");
    }
  }
  if (type !== 'zookeeper') {
    if (mode === 'zookeeper') throw new Error(`gateway.ha.store is zookeeper but the cluster's Flink configuration (gateway.cluster.flink-conf) sets high-availability.type: ${type}`);
    return { kind: 'local' };
  }
  const quorum = cluster['high-availability.zookeeper.quorum']?.trim();
  if (!quorum) throw new Error("the cluster's Flink configuration sets ZooKeeper HA without high-availability.zookeeper.quorum");
  const ms = (key: string, fallback: number) => {
    const v = cluster[key]?.trim();
    // Flink reads a plain number here as milliseconds.
    return v ? (/^\d+$/.test(v) ? Number(v) : parseDuration(v)) : fallback;
  };
  return {
    kind: 'zookeeper',
    settings: {
      quorum,
      namespace: zkPath(cluster['high-availability.zookeeper.path.root'] ?? '/flink', cluster['high-availability.cluster-id'] ?? '/default'),
      sessionTimeoutMs: ms('high-availability.zookeeper.client.session-timeout', 60_000),
      connectionTimeoutMs: ms('high-availability.zookeeper.client.connection-timeout', 15_000),
    },
  };
}
