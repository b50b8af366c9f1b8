import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { ArtifactFetcher } from './artifacts/artifact-fetcher';
import { createConnectGuard } from './net/connect-guard';
import { fetchError } from './plugin-kit/fetch-error';
import { FetchProgress } from './artifacts/fetch-progress';
import { FetchQueue } from './artifacts/fetch-queue';
import type { FsPluginDefinition, PluginContext } from './plugin-kit/fs-plugin';
import { JarCache } from './artifacts/jar-cache';
import { artifactOptions, caBundleOf, fetchSettings, handoffModeOf, zipLimitsOf } from './artifacts/options';
import { PluginRegistry } from './artifacts/plugin-registry';
import { UriAllowList } from './artifacts/uri-allow-list';
import { AuditLog } from './audit/audit-log';
import { ClusterVersion } from './cluster/flink-version';
import { JarHandoff } from './cluster/jar-handoff';
import { fetchJobStates, JobWatcher } from './cluster/job-watcher';
import { JobManagerClient, jobManagerClientOptions } from './cluster/jobmanager-client';
import { launchCluster } from './cluster/launch-cluster';
import { coreOptions } from './config/options';
import { ConfigError, type Configuration, OptionsRegistry } from './config/registry';
import { watchSecretsDir } from './config/secrets-dir';
import { HaCoordinator } from './ha/ha-coordinator';
import { FlinkLeaderFollower } from './ha/flink-leader';
import { HaConfigProblem, haOptions, haRules, haSecretProblem, haSharedSecretOf, haStoreOf } from './ha/ha-options';
import { KubernetesLeaderFollower } from './ha/kubernetes-leader';
import { isForbidden, KubernetesSession } from './ha/kubernetes-session';
import { KubernetesJobClaims, KubernetesRegistrationStore } from './ha/kubernetes-store';
import { RecordSeal } from './ha/record-seal';
import type { FollowLeader, SharedRegistrationStore } from './ha/shared-store';
import { digestFromSecret, ZooKeeperSession } from './ha/zookeeper';
import { type RejectedRecord, ZooKeeperJobClaims, ZooKeeperRegistrationStore } from './ha/zookeeper-store';
import { createApp } from './http/app';
import { Authenticator, authOptionsOf } from './http/auth';
import { Permissions, permissionListsOf } from './http/authorization';
import { gatewaySecretRule } from './http/configuration-filter';
import { drainServer } from './http/listener';
import { Metrics } from './metrics';
import { projectRoot } from './project-root';
import { JobClaims } from './submission/job-claims';
import { JobRegistrations } from './submission/job-registrations';
import { FileRegistrationStore, type RegistrationStore } from './submission/registration-store';
import { RemoteJars } from './submission/remote-jars';
import { RunService } from './submission/run-service';
import { type UnregisteredJobsPolicy, UnregisteredJobs } from './submission/unregistered-jobs';
import { jobSecretRule } from './tokens/job-configuration';
import { tokenProvidersOf } from './tokens/providers';
import type { TokenManager } from './plugin-kit/token-spi';
import { BridgeUrlFile, builtInTokenServices as tokenServicesOf, createTokenDelivery, receiversFor, type TokenServices, tokenStoreDir } from './tokens/token-delivery';
import { bridgeEndpoint } from './http/token-bridge-route';
import { createTokenManager } from './tokens/token-manager';
import { tokenOptions, tokenRules, tokensEnabled, watcherSettings } from './tokens/token-options';
import { artifactRules } from './artifacts/artifact-rules';
import { clusterRules } from './cluster/cluster-rules';
import { httpRules } from './http/http-rules';
import { v8Options } from './v8-tuning';

export type { TokenServices } from './tokens/token-delivery';

/** The built-in token providers (the plugins' own and oauth2), trusting the plugins' CA bundle too. */
export function builtInTokenServices(config: Configuration, logger: Logger, plugins: readonly FsPluginDefinition[]): TokenServices {
  return tokenServicesOf(logger, plugins, caBundleOf(config));
}

/** Every option and cross-option rule the gateway knows: core, artifacts, tokens, and each plugin's own (with its token provider's). */
export function createRegistry(plugins: readonly FsPluginDefinition[] = []): OptionsRegistry {
  const providers = tokenProvidersOf(plugins);
  return new OptionsRegistry(
    [...Object.values(coreOptions), ...Object.values(artifactOptions), ...Object.values(tokenOptions), ...Object.values(haOptions), ...Object.values(v8Options), ...plugins.flatMap((p) => p.options), ...providers.flatMap((p) => p.options)],
    [...httpRules, ...clusterRules, ...artifactRules, ...tokenRules, ...haRules, ...plugins.flatMap((p) => p.rules ?? []), ...providers.flatMap((p) => p.rules ?? [])],
  );
}

/**
 * How long the replicas' shared store keeps a job-id claim: only a bound on the store's size. A claim
 * is honoured only while the JobManager knows its job (run-service.ts checks before it answers from
 * one); the local claim book is bounded by count alone.
 */
const SHARED_CLAIM_RETENTION_MS = 30 * 24 * 3600 * 1000;

export interface Gateway {
  app: Express;
  config: Configuration;
  cluster: JobManagerClient;
  fetches: FetchProgress;
  tokens: TokenManager;
  registrations: JobRegistrations;
  /** Tells the gateway where it listens, once it does (a launched cluster's token bridge reads it). */
  listening(address: AddressInfo, tls?: boolean): void;
  /** Stops accepting work, waits for in-flight requests, then releases everything in reverse order of creation. */
  close(server?: Server): Promise<void>;
}

/**
 * The composition root: the one place that constructs services and wires them together; everything
 * else receives what it needs. Each resource joins `resources` as it is made, so a start-up that fails
 * half-way releases what it built (in reverse order), and `close` releases the same way.
 */
export async function compose(config: Configuration, logger: Logger, plugins: readonly FsPluginDefinition[] = [], reload?: () => Configuration, tokenServices: TokenServices = {}): Promise<Gateway> {
  const resources = new AsyncDisposableStack();
  try {
    // Tokens first: a provider that fails to initialise stops start-up before anything else starts.
    const tokenLog = logger.child({ component: 'tokens' });
    const delivery = await createTokenDelivery(config, tokenLog, tokenStoreDir(config, config.get(artifactOptions.cacheDir)));
    resources.defer(async () => delivery?.file?.flush());
    const providers = tokenServices.providers ?? [];
    const tokens = resources.adopt(await createTokenManager({ config, providers, receivers: receiversFor(tokenServices, delivery), log: tokenLog, ...(delivery ? { jobListener: delivery.receivers } : {}) }), (t) => t.close());

    // The JobManager: the one the configuration names, or one the gateway launches (with a URL file for its token bridge).
    let restUrl = config.getOptional(coreOptions.clusterRestUrl);
    let uploadDir = config.getOptional(coreOptions.jobManagerUploadDir);
    const bridgeUrl = !restUrl && delivery?.secret ? resources.adopt(new BridgeUrlFile(tokenLog), (f) => f.remove()) : undefined;
    if (!restUrl) {
      const flinkConfig = bridgeUrl && delivery?.secret ? bridgeUrl.flinkConfig(config, delivery.secret) : {};
      const launched = resources.adopt(await launchCluster({ config, log: logger, rootDir: projectRoot(), ...(uploadDir ? { uploadDir } : {}), flinkConfig, withTokenBridge: bridgeUrl !== undefined }), (c) => c.stop());
      restUrl = launched.restUrl;
      uploadDir = launched.uploadDir;
    }
    const cluster = resources.adopt(new JobManagerClient(jobManagerClientOptions(config, restUrl)), (c) => c.close());
    const audit = resources.adopt(AuditLog.open(config.get(coreOptions.auditLog)), (a) => a.close());

    // Remote jars: policy, plugins (each created now, so a bad setting fails start-up), cache, fetcher, hand-off.
    const allowList = new UriAllowList(config.get(artifactOptions.allowedUris));
    const guard = createConnectGuard({ allowList, enabled: config.get(artifactOptions.disallowRestrictedHosts), allowed: config.get(artifactOptions.restrictedHostsAllowed) });
    const ca = caBundleOf(config);
    const ctxFor = (current: Configuration) => (p: FsPluginDefinition) => ({ config: current, log: logger.child({ plugin: p.name }), guard, errors: fetchError, ...(ca ? { ca } : {}) });
    const pluginRegistry = resources.adopt(new PluginRegistry(plugins, ctxFor(config)), (r) => r.close());
    for (const p of plugins) pluginRegistry.fileSystemFor(p.schemes[0]!);
    const secretsDir = config.getOptional(coreOptions.secretsDir);
    // What configuration answers relayed from the JobManager must hide; known secret values follow rotation.
    let answerSecrets = gatewaySecretRule(config);
    if (secretsDir && reload) {
      resources.defer(watchSecretsDir(secretsDir, config.get(coreOptions.secretsPollInterval), () => {
        let next: Configuration | undefined;
        const current = () => (next ??= reload());
        reconfigurePlugins(pluginRegistry, () => ctxFor(current()), secretsDir, logger);
        try {
          answerSecrets = gatewaySecretRule(current());
        } catch {
          // Invalid: reconfigurePlugins logged why; the previous rule stays.
        }
      }));
    }
    const cache = new JarCache(config.get(artifactOptions.cacheDir), config.get(artifactOptions.cacheMaxSize), logger.child({ component: 'jar-cache' }));
    await cache.init();
    const fetches = new FetchProgress();
    const slots = new FetchQueue(config.get(artifactOptions.maxConcurrentFetches), config.get(artifactOptions.fetchQueueSize));
    const shutdown = resources.adopt(new AbortController(), (c) => c.abort());
    // One replica: registrations and claims in files of its own; an HA cluster's gateways: where
    // the cluster's HA data lives, its ZooKeeper (ADR 0012) or ConfigMaps in its namespace (ADR 0031).
    const { store: ha, secret } = haStoreOfConfig(config);
    const haLog = logger.child({ component: 'ha' });
    // Every record the replicas share is sealed under their secret, and the gateways authenticate to
    // ZooKeeper with a digest identity derived from it (ADR 0028).
    const seal = secret !== undefined ? new RecordSeal(secret) : undefined;
    // Called only once the stores read records, after the metrics exist.
    const onRejected: RejectedRecord = (kind, reason) => metrics.haRecordsRejected.inc({ kind, reason });
    const zookeeper = ha.kind === 'zookeeper' && secret !== undefined ? resources.adopt(new ZooKeeperSession(ha.settings, haLog, { digest: digestFromSecret(secret) }), (z) => z.close()) : undefined;
    if (zookeeper) haLog.info({ identity: zookeeper.identity }, "the gateway's ZooKeeper nodes admit this digest identity only");
    const kube = ha.kind === 'kubernetes' && seal ? resources.adopt(kubernetesSessionOf(ha.settings, haLog), (k) => k.close()) : undefined;
    let coordinator: HaCoordinator | undefined;
    const adoptUnsealed = config.get(haOptions.adoptUnsealedRecords);
    const sharedClaims =
      zookeeper && seal
        ? new ZooKeeperJobClaims(zookeeper, { retentionMs: SHARED_CLAIM_RETENTION_MS, seal, log: haLog.child({ store: 'claims' }), onRejected, adoptUnsealed })
        : kube && seal
          ? new KubernetesJobClaims(kube.client, kube.settings, { retentionMs: SHARED_CLAIM_RETENTION_MS, sealer: seal, log: haLog.child({ store: 'claims' }), onRejected })
          : undefined;
    const sharedStore: SharedRegistrationStore | undefined = !tokensEnabled(config)
      ? undefined
      : zookeeper && seal
        ? new ZooKeeperRegistrationStore(zookeeper, haLog, { seal, onRejected, adoptUnsealed })
        : kube && seal
          ? resources.adopt(new KubernetesRegistrationStore(kube.client, kube.settings, haLog, { sealer: seal, onRejected }), (s) => s.stop())
          : undefined;
    const store: RegistrationStore | undefined = !tokensEnabled(config)
      ? undefined
      : (sharedStore ?? resources.adopt(new FileRegistrationStore(tokenStoreDir(config, config.get(artifactOptions.cacheDir)), tokenLog), (s) => s.flush().catch((err: unknown) => tokenLog.error({ err }, 'cannot write the job-registration store'))));
    if (!sharedStore) await store?.init();
    const registrations = new JobRegistrations({
      tokens,
      ...(store ? { store } : {}),
      absentRetentionMs: config.get(tokenOptions.absentRetention),
      isSensitive: jobSecretRule(config.registry, tokens.jobRequestKeys()),
      cluster: config.cluster,
      log: tokenLog,
      ...(zookeeper || kube ? { active: () => coordinator?.isLeading() ?? false } : {}),
    });
    const metrics = new Metrics({
      fetchQueueDepth: () => slots.queued,
      cacheEntries: () => cache.stats().entries,
      registeredJobs: () => tokens.status().registeredJobs.length,
      restorePending: () => registrations.pendingRestores().length,
      tokenProviders: () => tokens.status().providers,
      nextRenewal: () => tokens.status().nextRenewalAt,
    });
    const fetcher = new ArtifactFetcher({ plugins: pluginRegistry, cache, slots, progress: fetches, allowList, audit, log: logger, shutdown: shutdown.signal, ...fetchSettings(config), onFetch: metrics.observeFetch });
    const handoff = new JarHandoff(handoffModeOf(config, uploadDir), cluster, uploadDir, logger.child({ component: 'handoff' }));

    // Jobs nobody registered before they started are registered with the cluster default scope or cancelled (ADR 0010).
    const unregistered = store
      ? new UnregisteredJobs({ policy: config.get(tokenOptions.unregisteredJobs) as UnregisteredJobsPolicy, registrations, cluster, defaults: config.getOptional(tokenOptions.clusterDefaultConfiguration) ?? {}, audit, log: logger.child({ component: 'unregistered-jobs' }), maxGraphBytes: config.get(tokenOptions.jobGraphMaxSize) })
      : undefined;
    if (unregistered?.policy === 'ignore') tokenLog.warn('gateway.tokens.unregistered-jobs: ignore — jobs the gateway did not register run without delegation tokens (each is audited)');
    const policyMode = config.get(coreOptions.policyMode) as 'open' | 'fetched-only';
    const runs = new RunService({
      cluster,
      claims: sharedClaims ?? new JobClaims({ dir: tokenStoreDir(config, config.get(artifactOptions.cacheDir)), log: logger.child({ component: 'job-claims' }) }),
      jarUriEnabled: config.get(coreOptions.jarUriEnable),
      ...(plugins.length > 0 ? { remoteJars: new RemoteJars(fetcher, handoff, cache) } : {}),
      dedupeRetentionMs: config.get(coreOptions.runDedupeRetention),
      jarBudget: {
        maxCount: config.get(coreOptions.jarsMaxCountPerPrincipal),
        maxBytes: config.get(coreOptions.jarsMaxSizePerPrincipal),
        maxTotalBytes: config.get(coreOptions.jarsMaxTotalSize),
      },
      placeholderMaxBytes: config.get(coreOptions.fetchedOnlyMaxUploadSize),
      registrations,
      policyMode,
      audit,
      onSubmission: (source, outcome) => metrics.submissions.inc({ source, outcome }),
    });
    let draining = false;
    const tokenBridge = bridgeEndpoint(delivery, tokens);
    const app = createApp({
      logger,
      cluster,
      runs,
      uploadMaxBytes: config.get(coreOptions.uploadMaxSize),
      zipLimits: zipLimitsOf(config),
      uploadSpoolDir: cache.tmpDir,
      handoff,
      jsonLimitBytes: config.get(coreOptions.maxJsonBody),
      isDraining: () => draining,
      fetches,
      tokens,
      restorePending: () => registrations.pendingRestores(),
      metrics,
      ...(tokenBridge ? { tokenBridge } : {}),
      ...(unregistered ? { jobGraphs: unregistered, registeredJobs: () => registrations.list() } : {}),
      ...(sharedStore ? { haStatus: () => coordinator?.status() } : {}),
      auth: new Authenticator(authOptionsOf(config, logger.child({ component: 'auth' }))),
      authorization: { permissions: new Permissions(permissionListsOf(config)), policyMode, audit, ...(unregistered ? { unregisteredJobs: unregistered.policy } : {}) },
      answerSecrets: () => answerSecrets,
      clusterVersion: new ClusterVersion(cluster, logger.child({ component: 'cluster-version' }), config.getOptional(coreOptions.clusterFlinkVersion)),
    });

    const watcher = store ? resources.adopt(new JobWatcher({ cluster, jobs: registrations, ...(unregistered ? { discovery: unregistered } : {}), ...watcherSettings(config), log: logger.child({ component: 'job-watcher' }) }), (w) => w.stop()) : undefined;
    if (sharedStore && (zookeeper || kube)) {
      // HA: only while its JobManager leads does this gateway register the stored jobs, obtain tokens and follow the jobs.
      const follow: FollowLeader = zookeeper ? (self, log) => new FlinkLeaderFollower(zookeeper, self, log) : (self, log) => new KubernetesLeaderFollower(kube!.client, kube!.settings, self, log);
      const engine = zookeeper ? 'ZooKeeper' : 'the Kubernetes API server';
      coordinator = resources.adopt(new HaCoordinator({ session: (zookeeper ?? kube)!, follow, engine, store: sharedStore, ...(sharedClaims ? { claims: sharedClaims } : {}), registrations, tokens, cluster, ...(watcher ? { watcher } : {}), readStates: () => fetchJobStates(cluster), log: haLog }), (c) => c.stop());
      await coordinator.start();
    } else {
      // Without tokens the shared store holds only the job-id claims: a store not reachable yet makes
      // runs 503 GW_HA_STORE_UNAVAILABLE until it is, as on the coordinator's path; it does not stop
      // start-up. A missing Kubernetes permission does: it does not heal by waiting.
      if (zookeeper) await zookeeper.start().catch((err: unknown) => haLog.warn({ err: (err as Error).message }, 'ZooKeeper is not reachable yet; runs answer 503 GW_HA_STORE_UNAVAILABLE until it is'));
      if (kube) {
        await kube.start().catch((err: unknown) => {
          if (isForbidden(err)) throw err;
          haLog.warn({ err: (err as Error).message }, 'the Kubernetes API server is not reachable yet; runs answer 503 GW_HA_STORE_UNAVAILABLE until it is');
        });
      }
      // Register the stored jobs again, then obtain tokens (the first cycle covers them), then follow the jobs.
      await registrations.restore(() => fetchJobStates(cluster));
      await tokens.start();
      watcher?.start();
    }
    // Close the ZooKeeper claims' nodes now (and adopt unsealed claims if asked), not at the first run.
    if (sharedClaims instanceof ZooKeeperJobClaims) await sharedClaims.init().catch((err: unknown) => {
      if ((err as { code?: unknown }).code === 'GW_CONFIG_INVALID') throw err;
      haLog.warn({ err: (err as Error).message }, 'cannot prepare the shared job-id claims yet; the next run tries again');
    });
    const owned = resources.move();
    return {
      app,
      config,
      cluster,
      fetches,
      tokens,
      registrations,
      listening: (address, tls = false) => bridgeUrl?.write(address, tls),
      async close(server) {
        draining = true;
        if (server) await drainServer(server, config.get(coreOptions.drainTimeout));
        await owned.disposeAsync();
      },
    };
  } catch (err) {
    await resources.disposeAsync().catch((cleanup: unknown) => logger.warn({ err: (cleanup as Error).message }, 'cleaning up after a failed start-up failed'));
    throw err;
  }
}

/** A changed secrets directory: the plugins use the new credentials from their next request (or keep the old ones on a bad value). */
function reconfigurePlugins(registry: PluginRegistry, ctxFor: () => (plugin: FsPluginDefinition) => PluginContext, dir: string, logger: Logger): void {
  try {
    registry.reconfigure(ctxFor());
    logger.info({ dir }, 'secret files changed; filesystem plugins will use the new credentials');
  } catch (err) {
    logger.error({ dir, err: (err as Error).message }, 'secret files changed but the configuration is invalid; keeping the previous credentials');
  }
}

/** The Kubernetes connection of the cluster's Flink configuration; one that cannot be resolved is a configuration problem (exit 2). */
function kubernetesSessionOf(settings: ConstructorParameters<typeof KubernetesSession>[0], log: Logger): KubernetesSession {
  try {
    return new KubernetesSession(settings, log);
  } catch (err) {
    throw new ConfigError([{ key: haOptions.store.key, source: "gateway.ha.store and the cluster's Flink configuration", message: (err as Error).message }]);
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
    const source = key.startsWith('gateway.') ? "gateway.ha.store and the cluster's Flink configuration" : "the cluster's Flink configuration (gateway.cluster.flink-conf)";
    throw new ConfigError([{ key, source, message: (err as Error).message }]);
  }
  const secret = haSharedSecretOf(config);
  const missing = haSecretProblem(store, secret);
  if (missing) throw new ConfigError([{ key: missing.key, source: `gateway.ha.store (${store.kind})`, message: missing.message }]);
  return { store, secret };
}
