import { readFileSync } from 'node:fs';
import type { Configuration } from '../config/registry';
import type { ConfigRule } from '../config/registry';
import { type OptionDef, option, parseDuration } from '../config/types';
import type { KubernetesHaSettings } from './kubernetes-settings';
import { MIN_SECRET_BYTES } from './record-seal';
import type { ZooKeeperSettings } from './zookeeper';

const section = 'High availability';

export const haOptions = {
  store: option({
    key: 'gateway.ha.store',
    type: 'enum',
    default: 'auto',
    values: ['auto', 'local', 'zookeeper', 'kubernetes'],
    section,
    description:
      "Where job registrations and job-id claims live (docs/adr/0012-ha-gateways-follow-flinks-leader.md, docs/adr/0031-kubernetes-ha-store.md). auto: where the cluster's own HA data lives, read from its Flink configuration (gateway.cluster.flink-conf) — its ZooKeeper for high-availability.type: zookeeper, ConfigMaps in its namespace for high-availability.type: kubernetes (or KubernetesHaServicesFactory's class name) — so the gateways of all JobManagers act as one and only the leading JobManager's gateway obtains tokens; with no HA, gateway.tokens.store-dir. local: always gateway.tokens.store-dir (one gateway only; with several JobManagers each gateway would be an island). zookeeper, kubernetes: that engine, and start-up fails when the cluster's configuration does not set it up. On Kubernetes the gateway needs get, list, watch, create, update and delete on ConfigMaps in the cluster's namespace (less than Flink's JobManager has).",
  }),
  sharedSecret: option({
    key: 'gateway.ha.shared-secret',
    type: 'string',
    sensitive: true,
    section,
    description: `The secret the gateways of one HA cluster share (docs/adr/0028-the-shared-ha-store-is-authenticated.md), at least ${MIN_SECRET_BYTES} bytes (e.g. \`openssl rand -base64 32\`), the same on every replica. Required whenever the store is a shared one (gateway.ha.store resolves to zookeeper or kubernetes): start-up fails without it. Two keys are derived from it with HKDF-SHA-256: the password of the gateways' ZooKeeper digest identity (every node the gateway creates is readable and writable by that identity only) and the key of the HMAC-SHA-256 seal over every record the replicas share (a record that does not open — forged, altered, moved to another node, or written without the secret — is ignored, logged and counted in flink_gateway_ha_records_rejected_total). Set it as a file named gateway.ha.shared-secret in gateway.secrets.dir (a Kubernetes Secret), or with gateway.ha.shared-secret-file; read at start-up (changing it means restarting every replica, and the records written under the old one are no longer trusted).`,
  }),
  sharedSecretFile: option({
    key: 'gateway.ha.shared-secret-file',
    type: 'string',
    section,
    description:
      'A file holding gateway.ha.shared-secret (one line; a trailing newline is removed), read at start-up. Set this or gateway.ha.shared-secret, not both.',
  }),
  adoptUnsealedRecords: option({
    key: 'gateway.ha.adopt-unsealed-records',
    type: 'boolean',
    default: false,
    section,
    description:
      "Upgrade aid for an HA cluster whose gateways ran without gateway.ha.shared-secret: at start-up, right after closing the ZooKeeper subtree, the registrations and job-id claims those gateways left unsealed are sealed and closed in place instead of ignored, so their running jobs keep their principals' registrations. It trusts whatever the store held before the upgrade (as the older gateways did): turn it on for the upgrade's start-up only, and only where nobody else could reach ZooKeeper, then off again. Records written after that start are never adopted.",
  }),
} satisfies Record<string, OptionDef>;

/** The replicas' shared secret, from gateway.ha.shared-secret or the file gateway.ha.shared-secret-file names; undefined when neither is set. */
export function haSharedSecretOf(config: Configuration): string | undefined {
  const value = config.getOptional(haOptions.sharedSecret);
  if (value !== undefined) return value;
  const file = config.getOptional(haOptions.sharedSecretFile);
  return file === undefined ? undefined : readFileSync(file, 'utf8').replace(/\r?\n$/, '');
}

/** The shared secret's own problems: set twice, unreadable, too short. Whether it is needed depends on the store (haSecretProblem). */
export const haRules: readonly ConfigRule[] = [
  {
    keys: [haOptions.sharedSecret.key, haOptions.sharedSecretFile.key],
    description: `one of the two or neither; the secret has at least ${MIN_SECRET_BYTES} bytes and its file is readable.`,
    reads: 'files',
    check(config) {
      const hasValue = config.getOptional(haOptions.sharedSecret) !== undefined;
      const file = config.getOptional(haOptions.sharedSecretFile);
      if (hasValue && file !== undefined)
        return [{ key: haOptions.sharedSecretFile.key, message: `${haOptions.sharedSecret.key} is set too: set one of the two` }];
      let secret: string | undefined;
      try {
        secret = haSharedSecretOf(config);
      } catch (err) {
        return [
          {
            key: haOptions.sharedSecretFile.key,
            message: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); fix the path or the file's permissions`,
          },
        ];
      }
      if (secret !== undefined && Buffer.byteLength(secret.trim(), 'utf8') < MIN_SECRET_BYTES) {
        return [
          {
            key: hasValue ? haOptions.sharedSecret.key : haOptions.sharedSecretFile.key,
            message: `the shared secret has fewer than ${MIN_SECRET_BYTES} bytes: use a random one such as the output of \`openssl rand -base64 32\``,
          },
        ];
      }
      return [];
    },
  },
];

/** A start-up problem of the HA store, naming the key to change (a Flink key of the cluster's configuration, or a gateway option). */
export class HaConfigProblem extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
  }
}

const STORE_NAMES: Record<string, string> = { zookeeper: 'ZooKeeper', kubernetes: 'Kubernetes' };

/** What is wrong when a shared store is used without the replicas' secret, or undefined. */
export function haSecretProblem(store: HaStore, secret: string | undefined): HaConfigProblem | undefined {
  if (store.kind === 'local' || secret !== undefined) return undefined;
  return new HaConfigProblem(
    haOptions.sharedSecret.key,
    `the gateways share a ${STORE_NAMES[store.kind] ?? store.kind} store, which anyone who reaches it could write: set the same random secret (at least ${MIN_SECRET_BYTES} bytes, e.g. \`openssl rand -base64 32\`) on every replica as ${haOptions.sharedSecret.key} (a file of that name in gateway.secrets.dir, or ${haOptions.sharedSecretFile.key}); it authenticates the gateways to the store and seals every record they share`,
  );
}

/** What `gateway.ha.store` resolves to for this cluster. */
export type HaStore =
  | { kind: 'local' }
  | { kind: 'zookeeper'; settings: ZooKeeperSettings }
  | { kind: 'kubernetes'; settings: KubernetesHaSettings };

/** Flink's ACL mode of the nodes it creates in ZooKeeper (HighAvailabilityOptions.ZOOKEEPER_CLIENT_ACL). */
export const ZK_ACL_KEY = 'high-availability.zookeeper.client.acl';

/** Flink's normalisation of a ZooKeeper path (ZooKeeperUtils.generateZookeeperPath): one leading slash, no trailing or double ones. */
function zkPath(...parts: string[]): string {
  const joined = parts
    .map((p) => p.replace(/^\/+|\/+$/g, ''))
    .filter(Boolean)
    .join('/');
  return `/${joined.replace(/\/+/g, '/')}`;
}

/** The factory class Flink's documentation and the operator's examples name for Kubernetes HA. */
export const KUBERNETES_HA_FACTORY = 'org.apache.flink.kubernetes.highavailability.KubernetesHaServicesFactory';

/**
 * The HA engine a `high-availability.type` value means, as Flink reads it (HighAvailabilityMode:
 * NONE, ZOOKEEPER, KUBERNETES in any case, else the name of a HighAvailabilityServicesFactory
 * class). Flink has no factory class for ZooKeeper; a factory class the gateway does not know is
 * `unknown` (never "no HA": the gateways would be islands without saying so).
 */
export function haTypeOf(cluster: Readonly<Record<string, string>>): {
  engine: 'none' | 'zookeeper' | 'kubernetes' | 'unknown';
  value: string;
} {
  const value = (cluster['high-availability.type'] ?? cluster['high-availability'] ?? 'NONE').trim();
  const lower = value.toLowerCase();
  if (lower === 'none' || lower === '') return { engine: 'none', value };
  if (lower === 'zookeeper') return { engine: 'zookeeper', value };
  if (lower === 'kubernetes' || value === KUBERNETES_HA_FACTORY) return { engine: 'kubernetes', value };
  return { engine: 'unknown', value };
}

/**
 * The shared store from `gateway.ha.store` and the cluster's own Flink configuration. Throws a
 * one-line reason when HA is asked for and cannot be served (a start-up configuration problem).
 */
export function haStoreOf(mode: string, cluster: Readonly<Record<string, string>>): HaStore {
  if (mode === 'local') return { kind: 'local' };
  const { engine, value } = haTypeOf(cluster);
  if (engine === 'unknown') {
    throw new Error(
      `the cluster's Flink configuration sets high-availability.type: ${value}, a factory class the gateway does not know, so it cannot tell where the cluster's HA data lives: set gateway.ha.store: local with one JobManager replica`,
    );
  }
  if (mode !== 'auto' && mode !== engine) {
    throw new Error(
      `gateway.ha.store is ${mode} but the cluster's Flink configuration (gateway.cluster.flink-conf) sets high-availability.type: ${value === KUBERNETES_HA_FACTORY ? value : value.toLowerCase()}`,
    );
  }
  if (engine === 'none') return { kind: 'local' };
  if (engine === 'kubernetes') return { kind: 'kubernetes', settings: kubernetesSettingsOf(cluster) };
  const quorum = cluster['high-availability.zookeeper.quorum']?.trim();
  // Flink's ZkClientACLMode: open (the default) or creator. Creator-only nodes need an authenticated
  // creator, which for Flink is its SASL (Kerberos) identity; the gateway's client cannot speak SASL.
  const acl = (cluster[ZK_ACL_KEY] ?? 'open').trim().toLowerCase();
  if (acl === 'creator') {
    throw new HaConfigProblem(
      ZK_ACL_KEY,
      `the cluster's Flink configuration sets ${ZK_ACL_KEY}: creator, so Flink's nodes are readable and writable only by its SASL (Kerberos) identity. The gateway's ZooKeeper client speaks digest authentication, not SASL: it could neither read Flink's leader records (to follow the leader) nor create its own nodes under the cluster's namespace. Use ${ZK_ACL_KEY}: open (the gateway's own nodes are still closed to everyone but the gateways, by a digest ACL under gateway.ha.shared-secret; keep ZooKeeper reachable only from the cluster's pods, e.g. with a NetworkPolicy), or run one JobManager with gateway.ha.store: local`,
    );
  }
  if (acl !== 'open')
    throw new HaConfigProblem(
      ZK_ACL_KEY,
      `the cluster's Flink configuration sets ${ZK_ACL_KEY}: ${acl}, which Flink does not know either: use open`,
    );
  if (!quorum) throw new Error("the cluster's Flink configuration sets ZooKeeper HA without high-availability.zookeeper.quorum");
  return {
    kind: 'zookeeper',
    settings: {
      quorum,
      namespace: zkPath(
        cluster['high-availability.zookeeper.path.root'] ?? '/flink',
        cluster['high-availability.cluster-id'] ?? '/default',
      ),
      sessionTimeoutMs: flinkMs(cluster, 'high-availability.zookeeper.client.session-timeout', 60_000),
      connectionTimeoutMs: flinkMs(cluster, 'high-availability.zookeeper.client.connection-timeout', 15_000),
    },
  };
}

/** A duration key of the cluster's configuration; Flink reads a plain number here as milliseconds. */
function flinkMs(cluster: Readonly<Record<string, string>>, key: string, fallback: number): number {
  const v = cluster[key]?.trim();
  return v ? (/^\d+$/.test(v) ? Number(v) : parseDuration(v)) : fallback;
}

/** Flink's Kubernetes HA keys: the cluster id and namespace of its ConfigMaps, how to reach the API server, its leader-election timings. */
function kubernetesSettingsOf(cluster: Readonly<Record<string, string>>): KubernetesHaSettings {
  const clusterId = cluster['kubernetes.cluster-id']?.trim();
  if (!clusterId)
    throw new Error(
      "the cluster's Flink configuration sets Kubernetes HA without kubernetes.cluster-id (the operator writes it into the JobManager's configuration)",
    );
  const configFile = cluster['kubernetes.config.file']?.trim();
  const context = cluster['kubernetes.context']?.trim();
  return {
    clusterId,
    namespace: cluster['kubernetes.namespace']?.trim() || 'default',
    ...(configFile ? { configFile } : {}),
    ...(context ? { context } : {}),
    leaseDurationMs: flinkMs(cluster, 'high-availability.kubernetes.leader-election.lease-duration', 15_000),
    renewDeadlineMs: flinkMs(cluster, 'high-availability.kubernetes.leader-election.renew-deadline', 15_000),
    retryPeriodMs: flinkMs(cluster, 'high-availability.kubernetes.leader-election.retry-period', 5_000),
  };
}
