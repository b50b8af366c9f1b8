import type { Logger } from 'pino';
import type { Configuration } from '../config/registry';
import { ConfigError } from '../config/registry';
import { fetchJobStates, type JobWatcher } from '../cluster/job-watcher';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { TokenManager } from '../plugin-kit/token-spi';
import { type JobClaimBook, JobClaims } from '../submission/job-claims';
import type { JobRegistrations } from '../submission/job-registrations';
import { FileRegistrationStore, type RegistrationStore } from '../submission/registration-store';
import { tokensEnabled } from '../tokens/token-options';
import { FlinkLeaderFollower } from './flink-leader';
import { HaCoordinator, type HaStatus } from './ha-coordinator';
import { HaConfigProblem, haOptions, haSecretProblem, haSharedSecretOf, haStoreOf } from './ha-options';
import { KubernetesLeaderFollower } from './kubernetes-leader';
import { isForbidden, KubernetesSession } from './kubernetes-session';
import { KubernetesJobClaims, KubernetesRegistrationStore } from './kubernetes-store';
import { RecordSeal } from './record-seal';
import type { FollowLeader, RejectedRecord, SharedRegistrationStore } from './shared-store';
import { digestFromSecret, ZooKeeperSession } from './zookeeper';
import { ZooKeeperJobClaims, ZooKeeperRegistrationStore } from './zookeeper-store';

/**
 * How long the replicas' shared store keeps a job-id claim: only a bound on the store's size. A claim
 * is honoured only while the JobManager knows its job (run-service.ts checks before it answers from
 * one); the local claim book is bounded by count alone.
 */
const SHARED_CLAIM_RETENTION_MS = 30 * 24 * 3600 * 1000;

/** What starting the registrations' life needs (the features built after the stores). */
export interface HaStartDeps {
  registrations: JobRegistrations;
  tokens: TokenManager;
  cluster: JobManagerClient;
  watcher: JobWatcher | undefined;
}

export interface HaFeature {
  /** Job-id claims: the replicas' shared ones, or this gateway's own file. */
  claims: JobClaimBook;
  /** Job registrations: the replicas' shared store, or this gateway's own file; none without delegation tokens. */
  store: RegistrationStore | undefined;
  /** Whether this gateway may register jobs now (only while its JobManager leads); absent for one replica. */
  active: (() => boolean) | undefined;
  /** The HA role for the status route; absent unless the registrations are shared. */
  status: (() => HaStatus | undefined) | undefined;
  /** Registers the stored jobs again, starts the tokens and the watcher: at once, or while this gateway's JobManager leads. */
  start(deps: HaStartDeps): Promise<void>;
}

/**
 * Where the registrations and the job-id claims live. One replica: files of its own. An HA
 * cluster's gateways: where the cluster's HA data lives, its ZooKeeper (ADR 0012) or ConfigMaps in
 * its namespace (ADR 0031); every record the replicas share is sealed under their secret, and the
 * gateways authenticate to ZooKeeper with a digest identity derived from it (ADR 0028).
 */
export async function createHa(o: {
  config: Configuration;
  logger: Logger;
  /** The token framework's logger (the file store logs with it). */
  tokenLog: Logger;
  /** Where this gateway's own registrations and claims are kept. */
  storeDir: string;
  /** Called for each shared record that does not verify (the metrics; only once the stores read records). */
  onRejected: RejectedRecord;
  resources: AsyncDisposableStack;
}): Promise<HaFeature> {
  const { config, resources, tokenLog, onRejected } = o;
  const { store: ha, secret } = haStoreOfConfig(config);
  const log = o.logger.child({ component: 'ha' });
  const seal = secret !== undefined ? new RecordSeal(secret) : undefined;
  const zookeeper =
    ha.kind === 'zookeeper' && secret !== undefined
      ? resources.adopt(new ZooKeeperSession(ha.settings, log, { digest: digestFromSecret(secret) }), (z) => z.close())
      : undefined;
  if (zookeeper) log.info({ identity: zookeeper.identity }, "the gateway's ZooKeeper nodes admit this digest identity only");
  const kube = ha.kind === 'kubernetes' && seal ? resources.adopt(kubernetesSessionOf(ha.settings, log), (k) => k.close()) : undefined;
  const adoptUnsealed = config.get(haOptions.adoptUnsealedRecords);
  const claimsLog = log.child({ store: 'claims' });
  let sharedClaims: ZooKeeperJobClaims | KubernetesJobClaims | undefined;
  let sharedStore: SharedRegistrationStore | undefined;
  if (zookeeper && seal) {
    sharedClaims = new ZooKeeperJobClaims(zookeeper, {
      retentionMs: SHARED_CLAIM_RETENTION_MS,
      seal,
      log: claimsLog,
      onRejected,
      adoptUnsealed,
    });
    if (tokensEnabled(config)) sharedStore = new ZooKeeperRegistrationStore(zookeeper, log, { seal, onRejected, adoptUnsealed });
  } else if (kube && seal) {
    sharedClaims = new KubernetesJobClaims(kube.client, kube.settings, {
      retentionMs: SHARED_CLAIM_RETENTION_MS,
      sealer: seal,
      log: claimsLog,
      onRejected,
    });
    if (tokensEnabled(config))
      sharedStore = resources.adopt(new KubernetesRegistrationStore(kube.client, kube.settings, log, { sealer: seal, onRejected }), (s) =>
        s.stop(),
      );
  }
  const flushed = (s: FileRegistrationStore) =>
    s.flush().catch((err: unknown) => tokenLog.error({ err }, 'cannot write the job-registration store'));
  const fileStore = () => resources.adopt(new FileRegistrationStore(o.storeDir, tokenLog), flushed);
  const store: RegistrationStore | undefined = !tokensEnabled(config) ? undefined : (sharedStore ?? fileStore());
  if (!sharedStore) await store?.init();
  let coordinator: HaCoordinator | undefined;

  async function start(deps: HaStartDeps): Promise<void> {
    const { registrations, tokens, cluster, watcher } = deps;
    if (sharedStore && (zookeeper || kube)) {
      // HA: only while its JobManager leads does this gateway register the stored jobs, obtain tokens and follow the jobs.
      const follow: FollowLeader = zookeeper
        ? (self, l) => new FlinkLeaderFollower(zookeeper, self, l)
        : (self, l) => new KubernetesLeaderFollower(kube!.client, kube!.settings, self, l);
      const engine = zookeeper ? 'ZooKeeper' : 'the Kubernetes API server';
      const session = (zookeeper ?? kube)!;
      const readStates = () => fetchJobStates(cluster);
      const options = { session, follow, engine, store: sharedStore, registrations, tokens, cluster, readStates, log };
      coordinator = resources.adopt(
        new HaCoordinator({ ...options, ...(sharedClaims ? { claims: sharedClaims } : {}), ...(watcher ? { watcher } : {}) }),
        (c) => c.stop(),
      );
      await coordinator.start();
    } else {
      // Without tokens the shared store holds only the job-id claims: a store not reachable yet makes
      // runs 503 GW_HA_STORE_UNAVAILABLE until it is, as on the coordinator's path; it does not stop
      // start-up. A missing Kubernetes permission does: it does not heal by waiting.
      if (zookeeper)
        await zookeeper
          .start()
          .catch((err: unknown) =>
            log.warn(
              { err: (err as Error).message },
              'ZooKeeper is not reachable yet; runs answer 503 GW_HA_STORE_UNAVAILABLE until it is',
            ),
          );
      if (kube) {
        await kube.start().catch((err: unknown) => {
          if (isForbidden(err)) throw err;
          log.warn(
            { err: (err as Error).message },
            'the Kubernetes API server is not reachable yet; runs answer 503 GW_HA_STORE_UNAVAILABLE until it is',
          );
        });
      }
      // Register the stored jobs again, then obtain tokens (the first cycle covers them), then follow the jobs.
      await registrations.restore(() => fetchJobStates(cluster));
      await tokens.start();
      watcher?.start();
    }
    // Close the ZooKeeper claims' nodes now (and adopt unsealed claims if asked), not at the first run.
    if (sharedClaims instanceof ZooKeeperJobClaims)
      await sharedClaims.init().catch((err: unknown) => {
        if ((err as { code?: unknown }).code === 'GW_CONFIG_INVALID') throw err;
        log.warn({ err: (err as Error).message }, 'cannot prepare the shared job-id claims yet; the next run tries again');
      });
  }

  return {
    claims: sharedClaims ?? new JobClaims({ dir: o.storeDir, log: o.logger.child({ component: 'job-claims' }) }),
    store,
    active: zookeeper || kube ? () => coordinator?.isLeading() ?? false : undefined,
    status: sharedStore ? () => coordinator?.status() : undefined,
    start,
  };
}

/** The Kubernetes connection of the cluster's Flink configuration; one that cannot be resolved is a configuration problem (exit 2). */
function kubernetesSessionOf(settings: ConstructorParameters<typeof KubernetesSession>[0], log: Logger): KubernetesSession {
  try {
    return new KubernetesSession(settings, log);
  } catch (err) {
    throw new ConfigError([
      { key: haOptions.store.key, source: "gateway.ha.store and the cluster's Flink configuration", message: (err as Error).message },
    ]);
  }
}

/**
 * gateway.ha.store against the cluster's Flink configuration, with the replicas' shared secret a
 * shared store needs; a mismatch, an ACL mode the gateway cannot honour or a missing secret is a
 * configuration problem (exit 2) naming the key to change.
 */
function haStoreOfConfig(config: Configuration): { store: ReturnType<typeof haStoreOf>; secret: string | undefined } {
  let store: ReturnType<typeof haStoreOf>;
  try {
    store = haStoreOf(config.get(haOptions.store), config.cluster);
  } catch (err) {
    const key = err instanceof HaConfigProblem ? err.key : haOptions.store.key;
    const source = key.startsWith('gateway.')
      ? "gateway.ha.store and the cluster's Flink configuration"
      : "the cluster's Flink configuration (gateway.cluster.flink-conf)";
    throw new ConfigError([{ key, source, message: (err as Error).message }]);
  }
  const secret = haSharedSecretOf(config);
  const missing = haSecretProblem(store, secret);
  if (missing) throw new ConfigError([{ key: missing.key, source: `gateway.ha.store (${store.kind})`, message: missing.message }]);
  return { store, secret };
}
