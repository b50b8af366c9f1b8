import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Configuration } from '../config/registry';
import { coreOptions } from '../config/options';
import { EmbeddedCluster, EmbeddedUnavailableError } from './embedded-cluster';
import { ensureFlinkDistribution } from './flink-distribution';
import { StandaloneCluster } from './standalone-cluster';

/** A session cluster the gateway started itself (when gateway.cluster.rest-url is unset). */
export interface LaunchedCluster {
  readonly restUrl: string;
  /** The JobManager's web.upload.dir (the gateway shares it for the zero-copy hand-off). */
  readonly uploadDir: string;
  stop(): Promise<void>;
}

export interface LaunchOptions {
  config: Configuration;
  log: Logger;
  rootDir: string;
  /** web.upload.dir for the embedded cluster, if the gateway's configuration names one. */
  uploadDir?: string;
  /** Flink configuration for the cluster (the token bridge's keys). */
  flinkConfig: Record<string, string>;
  /** The token bridge must be on the cluster's class path (its keys are in flinkConfig). */
  withTokenBridge: boolean;
}

/**
 * `npm start`'s cluster: the one-JVM MiniCluster (embedded-flink/, the fast default), or Flink's
 * own distribution — a version assembled from PyPI (gateway.embedded.flink-version) or a directory
 * (gateway.embedded.flink-home) — run with Flink's scripts as separate JobManager and TaskManager
 * processes. ADR 0011 says what each is for.
 */
export async function launchCluster(options: LaunchOptions): Promise<LaunchedCluster> {
  // Jobs that bundle the token bridge's API anyway still see the cluster's registry.
  const opts = {
    ...options,
    flinkConfig: { 'classloader.parent-first-patterns.additional': 'dev.flinkjargateway.tokens.', ...options.flinkConfig },
  };
  const { config, log } = opts;
  const version = config.getOptional(coreOptions.embeddedFlinkVersion);
  const ownHome = config.getOptional(coreOptions.embeddedFlinkHome);
  const java = config.getOptional(coreOptions.embeddedJava);
  if (version === undefined && ownHome === undefined) {
    return EmbeddedCluster.start({
      rootDir: opts.rootDir,
      ...(java ? { java } : {}),
      jvmOptions: config.get(coreOptions.embeddedJvmOpts).split(/\s+/).filter(Boolean),
      slots: config.get(coreOptions.embeddedSlots),
      ...(opts.uploadDir ? { uploadDir: opts.uploadDir } : {}),
      startupTimeoutMs: config.get(coreOptions.embeddedStartupTimeout),
      log,
      flinkConfig: opts.flinkConfig,
    });
  }
  if (version !== undefined && ownHome !== undefined) {
    throw new EmbeddedUnavailableError(
      'set gateway.embedded.flink-version (a distribution downloaded from PyPI) or gateway.embedded.flink-home (your own), not both',
    );
  }
  const cacheDir = config.getOptional(coreOptions.embeddedCacheDir);
  const home = ownHome ?? ensureFlinkDistribution({ version: version!, ...(cacheDir ? { cacheDir } : {}), log });
  const bridge = opts.withTokenBridge ? tokenBridgeJar(opts.rootDir, log) : undefined;
  // Without the jar the bridge's keys would name a provider nobody loads: leave them out.
  const flinkConfig = bridge ? opts.flinkConfig : withoutBridgeKeys(opts.flinkConfig);
  return StandaloneCluster.start({
    home,
    taskManagers: config.get(coreOptions.embeddedTaskManagers),
    slots: config.get(coreOptions.embeddedSlots),
    // The embedded cluster's JVM options (-Xmx…) would contradict Flink's memory model: only the rest.
    jvmOptions: config
      .get(coreOptions.embeddedJvmOpts)
      .split(/\s+/)
      .filter((o) => o && !/^-Xm[sx]/.test(o))
      .join(' '),
    ...(bridge ? { extraLibJars: [bridge] } : {}),
    flinkConfig,
    startupTimeoutMs: config.get(coreOptions.embeddedStartupTimeout),
    log,
    ...(java ? { java } : {}),
  });
}

/**
 * token-bridge/'s jar (built with Maven on first use), for lib/ of a distribution cluster — where
 * a user installs it (token-bridge/README.md). Undefined, with a warning, when it cannot be built.
 */
function tokenBridgeJar(rootDir: string, log: Logger): string | undefined {
  const jar = join(rootDir, 'token-bridge', 'target', 'flink-jar-gateway-token-bridge.jar');
  if (!existsSync(jar)) {
    const r = spawnSync('mvn', ['-q', '-B', '-f', join(rootDir, 'token-bridge', 'pom.xml'), 'package', '-DskipTests'], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (r.status !== 0 || !existsSync(jar)) {
      log.warn(
        'cannot build token-bridge/ with Maven: the distribution cluster starts without the token bridge (jobs cannot read GatewayTokens)',
      );
      return undefined;
    }
  }
  return jar;
}

function withoutBridgeKeys(flinkConfig: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(flinkConfig).filter(([k]) => !k.startsWith('security.delegation.token')));
}
