import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { ArtifactFetcher } from './artifacts/artifact-fetcher';
import { AuditLog } from './audit/audit-log';
import { UriAllowList } from './artifacts/uri-allow-list';
import { Permissions } from './http/authorization';
import { createConnectGuard } from './artifacts/connect-guard';
import { fetchError } from './artifacts/fetch-error';
import { FetchProgress } from './artifacts/fetch-progress';
import type { FsPluginDefinition } from './artifacts/fs-plugin';
import { JarCache } from './artifacts/jar-cache';
import { artifactOptions } from './artifacts/options';
import { PluginRegistry } from './artifacts/plugin-registry';
import { FetchQueue } from './artifacts/fetch-queue';
import { ClusterVersion } from './cluster/flink-version';
import { launchCluster, type LaunchedCluster } from './cluster/launch-cluster';
import { JarHandoff } from './cluster/jar-handoff';
import { fetchJobStates, JobWatcher } from './cluster/job-watcher';
import { JobManagerClient } from './cluster/jobmanager-client';
import { coreRules } from './config/core-rules';
import { coreOptions } from './config/options';
import { type Configuration, OptionsRegistry } from './config/registry';
import { secretsFingerprint } from './config/secrets-dir';
import { createApp } from './http/app';
import { Metrics } from './metrics';
import { isLoopbackAddress } from './http/loopback';
import type { TokenBridgeDeps } from './http/token-bridge-route';
import { Authenticator } from './http/auth';
import { projectRoot } from './project-root';
import { jobSecretRule } from './tokens/job-configuration';
import { JobRegistrations } from './submission/job-registrations';
import { JobClaims } from './submission/job-claims';
import { RegistrationStore } from './submission/registration-store';
import { RemoteJars } from './submission/remote-jars';
import { RunService } from './submission/run-service';
import { type UnregisteredJobsPolicy, UnregisteredJobs } from './submission/unregistered-jobs';
import type { DelegationTokenProvider, DelegationTokenReceiver, TokenManager } from './tokens/spi';
import { tokenProvidersOf } from './tokens/providers';
import { BridgeReceiverSet } from './tokens/receivers/bridge-receivers';
import { BridgeSecret } from './tokens/receivers/bridge-secret';
import { FileTokenReceiver } from './tokens/receivers/file-receiver';
import { createTokenManager } from './tokens/token-manager';
import { tokenOptions } from './tokens/token-options';

/**
 * Every option the gateway knows: core, artifacts, delegation tokens (with the built-in providers'),
 * and each plugin's own.
 */
export function createRegistry(plugins: readonly FsPluginDefinition[] = []): OptionsRegistry {
  return new OptionsRegistry(
    [
      ...Object.values(coreOptions),
      ...Object.values(artifactOptions),
      ...Object.values(tokenOptions),
      ...plugins.flatMap((p) => p.options),
      ...tokenProvidersOf(plugins).flatMap((p) => p.options),
    ],
    [...coreRules, ...plugins.flatMap((p) => p.rules ?? []), ...tokenProvidersOf(plugins).flatMap((p) => p.rules ?? [])],
  );
}

/**
 * The delegation-token providers and receivers to load (each enabled unless
 * `security.delegation.token.provider.<name>.enabled: false`). A provider with a receiver of the same
 * name in `receivers` has its tokens applied by that receiver; every other provider is paired with
 * the gateway's delivery receiver (`BridgeReceiverSet`: the token bridge endpoint, and the file
 * receiver when `gateway.tokens.file-receiver.dir` is set), which takes its tokens to the job's tasks.
 */
export interface TokenServices {
  providers?: readonly DelegationTokenProvider[];
  receivers?: readonly DelegationTokenReceiver[];
}

/**
 * The built-in providers (the plugins' own — s3, azure-blob — and oauth2), for `main.ts`. Each is enabled by default and
 * stays inactive until its credentials are configured (then it obtains tokens for registered
 * jobs); a job asking an unconfigured one for something is rejected.
 */
export function builtInTokenServices(config: Configuration, logger: Logger, plugins: readonly FsPluginDefinition[]): TokenServices {
  const caPath = config.getOptional(artifactOptions.caBundle);
  const ca = caPath ? readFileSync(caPath, 'utf8') : undefined;
  const log = logger.child({ component: 'tokens' });
  return { providers: tokenProvidersOf(plugins).map((p) => p.create({ log, ...(ca ? { ca } : {}) })) };
}

/**
 * How long a job id stays bound to its first run: longer than any job a session cluster keeps
 * (running ones for as long as they run, in practice; finished ones for jobstore.expiration-time).
 */
const JOB_CLAIM_RETENTION_MS = 30 * 24 * 3600 * 1000;

/** Where job registrations, job-id claims (and by default the bridge secret) are kept. */
function tokenStoreDir(config: Configuration): string {
  return config.getOptional(tokenOptions.storeDir) ?? join(config.get(artifactOptions.cacheDir), 'registrations');
}

/** The gateway's side of delivering tokens to the job's tasks (docs/adr/0005-token-delivery.md). */
interface TokenDelivery {
  receivers: BridgeReceiverSet;
  file?: FileTokenReceiver;
  /** Absent when gateway.tokens.bridge-enabled is false. */
  secret?: BridgeSecret;
}

async function createTokenDelivery(config: Configuration, log: Logger): Promise<TokenDelivery | undefined> {
  if (!config.get(tokenOptions.enabled)) return undefined;
  const dir = config.getOptional(tokenOptions.fileReceiverDir);
  const file = dir ? new FileTokenReceiver({ dir, log }) : undefined;
  await file?.init();
  const secret = config.get(tokenOptions.bridgeEnabled)
    ? BridgeSecret.loadOrCreate(resolve(config.getOptional(tokenOptions.bridgeSecretFile) ?? join(tokenStoreDir(config), 'bridge-secret')), log)
    : undefined;
  return { receivers: new BridgeReceiverSet({ log, ...(file ? { file } : {}) }), ...(file ? { file } : {}), ...(secret ? { secret } : {}) };
}

/** The bridge endpoint: the delivery's container plus the earliest `validUntil` of its providers. */
function bridgeEndpoint(delivery: TokenDelivery | undefined, tokens: TokenManager): TokenBridgeDeps | undefined {
  if (!delivery?.secret) return undefined;
  return {
    secret: delivery.secret,
    container: () => {
      const container = delivery.receivers.container();
      const expiries = tokens
        .status()
        .providers.filter((p) => p.validUntil !== undefined && p.serviceName in container.tokens)
        .map((p) => Date.parse(p.validUntil!));
      return expiries.length > 0 ? { ...container, validUntil: Math.min(...expiries) } : container;
    },
  };
}

/** Flink configuration for the embedded cluster: its token bridge pulls from this gateway. */
function embeddedFlinkConfig(config: Configuration, delivery: TokenDelivery | undefined, bridgeUrlFile: string | undefined): Record<string, string> {
  // Jobs that bundle the bridge API anyway still see the cluster's registry.
  const out: Record<string, string> = { 'classloader.parent-first-patterns.additional': 'dev.flinkjargateway.tokens.' };
  if (delivery?.secret && bridgeUrlFile) {
    out['security.delegation.token.provider.gateway.url-file'] = bridgeUrlFile;
    out['security.delegation.token.provider.gateway.secret-file'] = delivery.secret.path;
    const poll = config.value('security.delegation.token.provider.gateway.poll-interval');
    if (poll !== undefined) out['security.delegation.token.provider.gateway.poll-interval'] = String(poll);
    // Flink 2.1 retries a failed cycle (e.g. a push to a TaskManager that is reconnecting) after a
    // fixed 1 h by default; the bridge's cycles are cheap, so retry after one poll interval.
    out['security.delegation.tokens.renewal.retry.backoff'] = poll !== undefined ? String(poll) : '10 s';
  }
  return out;
}

export interface Gateway {
  app: Express;
  config: Configuration;
  cluster: JobManagerClient;
  /** The cluster the gateway launched (embedded MiniCluster or Flink distribution), if any. */
  embedded?: LaunchedCluster;
  fetches: FetchProgress;
  tokens: TokenManager;
  registrations: JobRegistrations;
  /**
   * Tells the gateway where it listens, once it does: the embedded cluster's token bridge reads
   * the gateway's URL from a file this writes (the port may be ephemeral).
   */
  listening(address: AddressInfo, tls?: boolean): void;
  /** Stops accepting work, waits for in-flight requests, stops the embedded cluster. */
  close(server?: Server): Promise<void>;
}

/**
 * The composition root: the one place that constructs services and wires them together.
 * Everything else receives what it needs.
 */
export async function compose(
  config: Configuration,
  logger: Logger,
  plugins: readonly FsPluginDefinition[] = [],
  /** Re-reads every source (used when gateway.secrets.dir changes). */
  reload?: () => Configuration,
  tokenServices: TokenServices = {},
): Promise<Gateway> {
  // First, before anything is started: a provider that fails to initialise stops start-up.
  const tokenLog = logger.child({ component: 'tokens' });
  const delivery = await createTokenDelivery(config, tokenLog);
  const providers = tokenServices.providers ?? [];
  const own = new Set((tokenServices.receivers ?? []).map((r) => r.serviceName));
  const delivered = delivery ? delivery.receivers.receiversFor(providers.map((p) => p.serviceName).filter((name) => !own.has(name))) : [];
  const tokens = await createTokenManager({
    config,
    providers,
    receivers: [...(tokenServices.receivers ?? []), ...delivered],
    log: tokenLog,
    ...(delivery ? { jobListener: delivery.receivers } : {}),
  });
  try {
    return await composeServices(config, logger, plugins, reload, tokens, delivery);
  } catch (err) {
    await tokens.close().catch(() => undefined);
    throw err;
  }
}

async function composeServices(
  config: Configuration,
  logger: Logger,
  plugins: readonly FsPluginDefinition[],
  reload: (() => Configuration) | undefined,
  tokens: TokenManager,
  delivery: TokenDelivery | undefined,
): Promise<Gateway> {
  let embedded: LaunchedCluster | undefined;
  let restUrl = config.getOptional(coreOptions.clusterRestUrl);
  let uploadDir = config.getOptional(coreOptions.jobManagerUploadDir);
  // The embedded cluster's token bridge learns this gateway's URL from a file in here, written
  // once the gateway listens (`listening`).
  let bridgeDir: string | undefined;
  if (!restUrl) {
    bridgeDir = delivery?.secret ? mkdtempSync(join(tmpdir(), 'flink-jar-gateway-bridge-')) : undefined;
    try {
      embedded = await launchCluster({
        config,
        log: logger,
        rootDir: projectRoot(),
        ...(uploadDir ? { uploadDir } : {}),
        flinkConfig: embeddedFlinkConfig(config, delivery, bridgeDir ? join(bridgeDir, 'url') : undefined),
        withTokenBridge: bridgeDir !== undefined,
      });
    } catch (err) {
      if (bridgeDir) rmSync(bridgeDir, { recursive: true, force: true });
      throw err;
    }
    restUrl = embedded.restUrl;
    uploadDir = embedded.uploadDir;
  }
  const clusterTls = clusterTlsOptions(config);
  const cluster = new JobManagerClient({
    baseUrl: restUrl,
    requestTimeoutMs: config.get(coreOptions.clusterRequestTimeout),
    runTimeoutMs: config.get(coreOptions.clusterRunTimeout),
    // The gateway → JobManager hop speaks TLS when the JobManager's REST does.
    ...(clusterTls ? { dispatcher: JobManagerClient.pool(clusterTls), passThroughDispatcher: JobManagerClient.pool(clusterTls) } : {}),
  });

  const shutdown = new AbortController();
  const allowList = new UriAllowList(config.get(artifactOptions.allowedUris));
  const auth = new Authenticator({
    ...(config.getOptional(coreOptions.authTokensFile) ? { tokensFile: config.getOptional(coreOptions.authTokensFile)! } : {}),
    mutualTls: config.getOptional(coreOptions.tlsClientCa) !== undefined,
    maxAnonymousPassThrough: config.get(coreOptions.httpMaxAnonymousRequests),
    log: logger.child({ component: 'auth' }),
  });
  const permissions = new Permissions({
    read: config.get(coreOptions.permissionRead),
    submit: config.get(coreOptions.permissionSubmit),
    cancel: config.get(coreOptions.permissionCancel),
  });
  const policyMode = config.get(coreOptions.policyMode) as 'open' | 'fetched-only';
  const audit = AuditLog.open(config.get(coreOptions.auditLog));
  const guard = createConnectGuard({
    allowList,
    enabled: config.get(artifactOptions.disallowRestrictedHosts),
    allowed: config.get(artifactOptions.restrictedHostsAllowed),
  });
  const caPath = config.getOptional(artifactOptions.caBundle);
  const ca = caPath ? readFileSync(caPath, 'utf8') : undefined;
  const ctxFor = (current: Configuration) => (p: FsPluginDefinition) => ({ config: current, log: logger.child({ plugin: p.name }), guard, errors: fetchError, ...(ca ? { ca } : {}) });
  const registry = new PluginRegistry(plugins, ctxFor(config));
  // Create every plugin now: a bad plugin setting (a half key pair, a bad endpoint) fails start-up
  // loudly instead of the first fetch, and readiness then implies working plugins.
  for (const p of plugins) registry.fileSystemFor(p.schemes[0]!);
  const secretsDir = config.getOptional(coreOptions.secretsDir);
  const stopWatching = secretsDir && reload
    ? watchSecrets(secretsDir, config.get(coreOptions.secretsPollInterval), () => {
        try {
          registry.reconfigure(ctxFor(reload()));
          logger.info({ dir: secretsDir }, 'secret files changed; filesystem plugins will use the new credentials');
        } catch (err) {
          logger.error({ dir: secretsDir, err: (err as Error).message }, 'secret files changed but the configuration is invalid; keeping the previous credentials');
        }
      })
    : () => undefined;
  const cache = new JarCache(config.get(artifactOptions.cacheDir), config.get(artifactOptions.cacheMaxSize), logger.child({ component: 'jar-cache' }));
  await cache.init();
  const fetches = new FetchProgress();
  const slots = new FetchQueue(config.get(artifactOptions.maxConcurrentFetches), config.get(artifactOptions.fetchQueueSize));
  const metrics = new Metrics({
    fetchQueueDepth: () => slots.queued,
    cacheEntries: () => cache.stats().entries,
    registeredJobs: () => tokens.status().registeredJobs.length,
    restorePending: () => registrations.pendingRestores().length,
    tokenProviders: () => tokens.status().providers,
    nextRenewal: () => tokens.status().nextRenewalAt,
  });
  // One set of zip-structure bounds for uploads and fetched jars alike.
  const zipLimits = {
    maxEntries: config.get(artifactOptions.maxZipEntries),
    maxCentralDirectorySize: config.get(artifactOptions.maxCentralDirectorySize),
    maxManifestSize: config.get(artifactOptions.maxManifestSize),
  };
  const fetcher = new ArtifactFetcher({
    plugins: registry,
    cache,
    slots,
    onFetch: (plugin, result, seconds, bytes) => {
      metrics.fetchDuration.observe({ plugin, result }, seconds);
      if (bytes > 0) metrics.fetchBytes.inc({ plugin }, bytes);
      if (result !== 'failed') metrics.cache.inc({ result: result === 'cached' ? 'hit' : 'miss' });
    },
    progress: fetches,
    allowedSchemes: config.get(artifactOptions.allowedSchemes),
    allowList,
    audit,
    maxBytes: config.get(artifactOptions.maxSize),
    zipLimits,
    timeoutMs: config.get(artifactOptions.fetchTimeout),
    retries: config.get(artifactOptions.fetchRetries),
    progressIntervalMs: config.get(artifactOptions.progressInterval),
    log: logger,
    shutdown: shutdown.signal,
  });
  const handoffSetting = config.get(artifactOptions.handoff);
  const handoffMode = handoffSetting === 'auto' ? (uploadDir ? 'shared-dir' : 'upload') : handoffSetting;
  const handoff = new JarHandoff(handoffMode as 'upload' | 'shared-dir', cluster, uploadDir, logger.child({ component: 'handoff' }));

  // Job registrations: persisted so that a restarted gateway registers its running jobs again;
  // followed by the job watcher, which unregisters jobs once they end.
  const tokensEnabled = config.get(tokenOptions.enabled);
  const tokenLog = logger.child({ component: 'tokens' });
  const store = tokensEnabled ? new RegistrationStore(tokenStoreDir(config), tokenLog) : undefined;
  await store?.init();
  const registrations = new JobRegistrations({ tokens, ...(store ? { store } : {}), isSensitive: jobSecretRule(config.registry, tokens.jobRequestKeys()), cluster: config.cluster, log: tokenLog });
  // Jobs nobody registered before they started (job graphs, jobs submitted past the gateway, a lost
  // store) are registered with the cluster default scope or cancelled (docs/adr/0010).
  const unregistered = tokensEnabled
    ? new UnregisteredJobs({
        policy: config.get(tokenOptions.unregisteredJobs) as UnregisteredJobsPolicy,
        registrations,
        cluster,
        defaults: config.getOptional(tokenOptions.clusterDefaultConfiguration) ?? {},
        audit,
        log: logger.child({ component: 'unregistered-jobs' }),
      })
    : undefined;
  if (unregistered?.policy === 'ignore') tokenLog.warn('gateway.tokens.unregistered-jobs: ignore — jobs the gateway did not register run without delegation tokens (each is audited)');
  const watcher = tokensEnabled
    ? new JobWatcher({
        cluster,
        jobs: registrations,
        ...(unregistered ? { discovery: unregistered } : {}),
        intervalMs: config.get(tokenOptions.watchInterval),
        maxBackoffMs: config.get(tokenOptions.watchMaxBackoff),
        missingReads: config.get(tokenOptions.watchMissingReads),
        missingGraceMs: config.get(tokenOptions.watchMissingGrace),
        log: logger.child({ component: 'job-watcher' }),
      })
    : undefined;

  // Job ids belong to their first principal and request (job-claims.ts), across restarts too.
  const claims = new JobClaims({ dir: tokenStoreDir(config), retentionMs: JOB_CLAIM_RETENTION_MS, log: logger.child({ component: 'job-claims' }) });
  const runs = new RunService({
    cluster,
    claims,
    jarUriEnabled: config.get(coreOptions.jarUriEnable),
    ...(plugins.length > 0 ? { remoteJars: new RemoteJars(fetcher, handoff, cache) } : {}),
    dedupeRetentionMs: config.get(coreOptions.runDedupeRetention),
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
    zipLimits,
    uploadSpoolDir: cache.tmpDir,
    jsonLimitBytes: config.get(coreOptions.maxJsonBody),
    isDraining: () => draining,
    fetches,
    tokens,
    restorePending: () => registrations.pendingRestores(),
    metrics,
    ...(tokenBridge ? { tokenBridge } : {}),
    ...(unregistered ? { jobGraphs: unregistered, registeredJobs: () => registrations.list() } : {}),
    auth,
    authorization: { permissions, policyMode, audit, ...(unregistered ? { unregisteredJobs: unregistered.policy } : {}) },
    clusterVersion: new ClusterVersion(cluster, logger.child({ component: 'cluster-version' }), config.getOptional(coreOptions.clusterFlinkVersion)),
  });
  // The app is composed: register the stored jobs again, then start obtaining tokens (the first
  // cycle then already covers them), then follow the jobs.
  await registrations.restore(() => fetchJobStates(cluster));
  await tokens.start();
  watcher?.start();
  return {
    app,
    config,
    cluster,
    fetches,
    tokens,
    registrations,
    ...(embedded ? { embedded } : {}),
    listening(address: AddressInfo, tls = false) {
      if (!bridgeDir) return;
      const host = address.address;
      if (!(host === '0.0.0.0' || host === '::' || isLoopbackAddress(host))) {
        tokenLog.warn({ address: host }, 'the gateway listens on a non-loopback address only, so the embedded cluster\'s token bridge cannot reach it (the bridge endpoint answers loopback clients only)');
        return;
      }
      const url = `${tls ? 'https' : 'http'}://${host === '::1' ? '[::1]' : '127.0.0.1'}:${address.port}`;
      const tmp = join(bridgeDir, `url.${process.pid}.tmp`);
      writeFileSync(tmp, `${url}\n`, { mode: 0o600 });
      renameSync(tmp, join(bridgeDir, 'url'));
      tokenLog.info({ url }, 'the embedded cluster\'s token bridge pulls tokens from this gateway');
    },
    async close(server?: Server) {
      draining = true;
      if (server) {
        // Requests in flight finish; a keep-alive connection is closed as soon as it goes idle
        // (not after its idle timeout); whatever is still open after the drain timeout is cut.
        const drainMs = config.get(coreOptions.drainTimeout);
        await new Promise<void>((resolve) => {
          const sweep = setInterval(() => server.closeIdleConnections(), 100);
          const deadline = setTimeout(() => server.closeAllConnections(), drainMs);
          server.close(() => {
            clearInterval(sweep);
            clearTimeout(deadline);
            resolve();
          });
          server.closeIdleConnections();
        });
      }
      await watcher?.stop();
      shutdown.abort();
      stopWatching();
      // Ends the session (providers forget their jobs) and closes the providers once. The store
      // keeps the registrations for the next start.
      await tokens.close();
      await delivery?.file?.flush();
      await store?.flush().catch((err: unknown) => tokenLog.error({ err }, 'cannot write the job-registration store'));
      await registry.close();
      await cluster.close();
      await embedded?.stop();
      audit.close();
      if (bridgeDir) rmSync(bridgeDir, { recursive: true, force: true });
    },
  };
}

/**
 * TLS settings of the gateway → JobManager hop: extra trusted CAs (`gateway.cluster.ca`, on top of
 * the system's) and a client certificate for a JobManager that requires one. Undefined: defaults.
 */
function clusterTlsOptions(config: Configuration): { ca?: string[]; cert?: string; key?: string } | undefined {
  const ca = config.getOptional(coreOptions.clusterCa);
  const cert = config.getOptional(coreOptions.clusterCert);
  const key = config.getOptional(coreOptions.clusterKey);
  if (!ca && !cert) return undefined;
  return {
    ...(ca ? { ca: [...rootCertificates, readFileSync(ca, 'utf8')] } : {}),
    ...(cert && key ? { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') } : {}),
  };
}

/** Polls a secrets directory (Kubernetes swaps Secret volumes atomically through symlinks, which file watchers miss). */
function watchSecrets(dir: string, intervalMs: number, onChange: () => void): () => void {
  let last = secretsFingerprint(dir);
  const timer = setInterval(() => {
    const now = secretsFingerprint(dir);
    if (now !== last) {
      last = now;
      onChange();
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
