import type { Logger } from 'pino';
import type { AuditLog } from '../audit/audit-log';
import type { Configuration } from '../config/registry';
import { createConnectGuard } from '../net/connect-guard';
import { fetchError } from '../plugin-kit/fetch-error';
import type { FsPluginDefinition, PluginContext } from '../plugin-kit/fs-plugin';
import { ArtifactFetcher, type FetcherOptions } from './artifact-fetcher';
import { FetchProgress } from './fetch-progress';
import { FetchQueue } from './fetch-queue';
import { JarCache } from './jar-cache';
import { artifactOptions, caBundleOf, fetchSettings } from './options';
import { PluginRegistry } from './plugin-registry';
import { UriAllowList } from './uri-allow-list';

export interface ArtifactsFeature {
  plugins: PluginRegistry;
  cache: JarCache;
  fetches: FetchProgress;
  slots: FetchQueue;
  fetcher: ArtifactFetcher;
  /** A changed secrets directory: the plugins use the configuration `current` gives from their next request (or keep theirs on a bad value). */
  reloadCredentials(current: () => Configuration, dir: string): void;
}

/**
 * Remote jars: the URI policy, the plugins (each created now, so a bad setting fails start-up), the
 * jar cache, the fetch queue and the fetcher. `onFetch` hears of every fetch (the metrics).
 */
export async function createArtifacts(o: {
  config: Configuration;
  logger: Logger;
  plugins: readonly FsPluginDefinition[];
  audit: AuditLog;
  onFetch: NonNullable<FetcherOptions['onFetch']>;
  resources: AsyncDisposableStack;
}): Promise<ArtifactsFeature> {
  const { config, logger, resources } = o;
  const allowList = new UriAllowList(config.get(artifactOptions.allowedUris));
  const guard = createConnectGuard({
    allowList,
    enabled: config.get(artifactOptions.disallowRestrictedHosts),
    allowed: config.get(artifactOptions.restrictedHostsAllowed),
  });
  const ca = caBundleOf(config);
  const ctxFor =
    (current: Configuration) =>
    (p: FsPluginDefinition): PluginContext => ({
      config: current,
      log: logger.child({ plugin: p.name }),
      guard,
      errors: fetchError,
      ...(ca ? { ca } : {}),
    });
  const plugins = resources.adopt(new PluginRegistry(o.plugins, ctxFor(config)), (r) => r.close());
  for (const p of o.plugins) plugins.fileSystemFor(p.schemes[0]!);
  const cache = new JarCache(
    config.get(artifactOptions.cacheDir),
    config.get(artifactOptions.cacheMaxSize),
    logger.child({ component: 'jar-cache' }),
  );
  await cache.init();
  const fetches = new FetchProgress();
  const slots = new FetchQueue(config.get(artifactOptions.maxConcurrentFetches), config.get(artifactOptions.fetchQueueSize));
  const shutdown = resources.adopt(new AbortController(), (c) => c.abort());
  const fetcher = new ArtifactFetcher({
    plugins,
    cache,
    slots,
    progress: fetches,
    allowList,
    audit: o.audit,
    log: logger,
    shutdown: shutdown.signal,
    ...fetchSettings(config),
    onFetch: o.onFetch,
  });
  const reloadCredentials = (current: () => Configuration, dir: string) => {
    try {
      plugins.reconfigure(ctxFor(current()));
      logger.info({ dir }, 'secret files changed; filesystem plugins will use the new credentials');
    } catch (err) {
      logger.error(
        { dir, err: (err as Error).message },
        'secret files changed but the configuration is invalid; keeping the previous credentials',
      );
    }
  };
  return { plugins, cache, fetches, slots, fetcher, reloadCredentials };
}
