import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { createArtifacts } from './artifacts/create-artifacts';
import type { FetchProgress } from './artifacts/fetch-progress';
import { artifactOptions, caBundleOf } from './artifacts/options';
import { AuditLog } from './audit/audit-log';
import { createCluster } from './cluster/create-cluster';
import type { JobManagerClient } from './cluster/jobmanager-client';
import { coreOptions } from './config/options';
import type { Configuration } from './config/registry';
import { followSecretsDir } from './config/secrets-dir';
import { createHa } from './ha/create-ha';
import type { RejectedRecord } from './ha/shared-store';
import { createHttp } from './http/create-http';
import { drainServer } from './http/listener';
import { Metrics } from './metrics';
import type { FsPluginDefinition } from './plugin-kit/fs-plugin';
import type { TokenManager } from './plugin-kit/token-spi';
import { createSubmission } from './submission/create-submission';
import type { JobRegistrations } from './submission/job-registrations';
import { createTokens } from './tokens/create-tokens';
import { builtInTokenServices as tokenServicesOf, type TokenServices, tokenStoreDir } from './tokens/token-delivery';

export { createRegistry } from './all-options';
export type { TokenServices } from './tokens/token-delivery';

/** The built-in token providers (the plugins' own and oauth2), trusting the plugins' CA bundle too. */
export function builtInTokenServices(config: Configuration, logger: Logger, plugins: readonly FsPluginDefinition[]): TokenServices {
  return tokenServicesOf(logger, plugins, caBundleOf(config));
}

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
 * The composition root: calls each feature's factory in order and hands it what the earlier ones
 * built; the decisions (which store, HA or not, launch a cluster or not) are the features' own.
 * Each resource joins `resources` as it is made, so a start-up that fails half-way releases what it
 * built (in reverse order), and `close` releases the same way.
 */
export async function compose(
  config: Configuration,
  logger: Logger,
  plugins: readonly FsPluginDefinition[] = [],
  reload?: () => Configuration,
  tokenServices: TokenServices = {},
): Promise<Gateway> {
  const resources = new AsyncDisposableStack();
  try {
    const storeDir = tokenStoreDir(config, config.get(artifactOptions.cacheDir));
    // Tokens first: a provider that fails to initialise stops start-up before anything else starts.
    const tokens = await createTokens({ config, logger, services: tokenServices, storeDir, resources });
    const cluster = await createCluster({ config, logger, launch: tokens.launch, resources });
    const audit = resources.adopt(AuditLog.open(config.get(coreOptions.auditLog)), (a) => a.close());
    // The metrics are made once the features they count exist; these callbacks run only after start-up.
    const artifacts = await createArtifacts({
      config,
      logger,
      plugins,
      audit,
      onFetch: (...fetch) => metrics.observeFetch(...fetch),
      resources,
    });
    const onRejected: RejectedRecord = (kind, reason) => metrics.haRecordsRejected.inc({ kind, reason });
    const ha = await createHa({ config, logger, tokenLog: tokens.log, storeDir, onRejected, resources });
    const submission = createSubmission({
      config,
      logger,
      tokens: tokens.tokens,
      tokenLog: tokens.log,
      cluster: cluster.cluster,
      uploadDir: cluster.uploadDir,
      artifacts,
      remoteJars: plugins.length > 0,
      audit,
      store: ha.store,
      claims: ha.claims,
      active: ha.active,
      onSubmission: (source, outcome) => metrics.submissions.inc({ source, outcome }),
      resources,
    });
    const { registrations } = submission;
    const metrics = new Metrics({
      fetchQueueDepth: () => artifacts.slots.queued,
      cacheEntries: () => artifacts.cache.stats().entries,
      registeredJobs: () => tokens.tokens.status().registeredJobs.length,
      restorePending: () => registrations.pendingRestores().length,
      tokenProviders: () => tokens.tokens.status().providers,
      nextRenewal: () => tokens.tokens.status().nextRenewalAt,
    });
    const http = createHttp({
      config,
      logger,
      cluster,
      artifacts,
      submission,
      tokens: tokens.tokens,
      delivery: tokens.delivery,
      audit,
      metrics,
      haStatus: ha.status,
    });
    const unfollow = followSecretsDir(config, reload, [artifacts.reloadCredentials, (current) => http.reloadSecrets(current)]);
    if (unfollow) resources.defer(unfollow);
    await ha.start({ registrations, tokens: tokens.tokens, cluster: cluster.cluster, watcher: submission.watcher });
    const owned = resources.move();
    return {
      app: http.app,
      config,
      cluster: cluster.cluster,
      fetches: artifacts.fetches,
      tokens: tokens.tokens,
      registrations,
      listening: (address, tls = false) => tokens.bridgeUrl?.write(address, tls),
      async close(server) {
        http.drain();
        if (server) await drainServer(server, config.get(coreOptions.drainTimeout));
        await owned.disposeAsync();
      },
    };
  } catch (err) {
    await resources
      .disposeAsync()
      .catch((cleanup: unknown) => logger.warn({ err: (cleanup as Error).message }, 'cleaning up after a failed start-up failed'));
    throw err;
  }
}
