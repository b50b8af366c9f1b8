import type { Server } from 'node:http';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { EmbeddedCluster } from './cluster/embedded-cluster';
import { JobManagerClient } from './cluster/jobmanager-client';
import { coreOptions } from './config/options';
import { Configuration, OptionsRegistry } from './config/registry';
import { createApp } from './http/app';
import { projectRoot } from './project-root';
import { RunService } from './submission/run-service';

/** Every option the gateway knows: core options plus each plugin's (added as plugins arrive). */
export function createRegistry(): OptionsRegistry {
  return new OptionsRegistry(Object.values(coreOptions));
}

export interface Gateway {
  app: Express;
  config: Configuration;
  cluster: JobManagerClient;
  embedded?: EmbeddedCluster;
  /** Stops accepting work, waits for in-flight requests, stops the embedded cluster. */
  close(server?: Server): Promise<void>;
}

/**
 * The composition root: the one place that constructs services and wires them together.
 * Everything else receives what it needs.
 */
export async function compose(config: Configuration, logger: Logger): Promise<Gateway> {
  let embedded: EmbeddedCluster | undefined;
  let restUrl = config.getOptional(coreOptions.clusterRestUrl);
  if (!restUrl) {
    const uploadDir = config.getOptional(coreOptions.embeddedUploadDir);
    embedded = await EmbeddedCluster.start({
      rootDir: projectRoot(),
      ...(config.getOptional(coreOptions.embeddedJava) ? { java: config.getOptional(coreOptions.embeddedJava)! } : {}),
      jvmOptions: config.get(coreOptions.embeddedJvmOpts).split(/\s+/).filter(Boolean),
      slots: config.get(coreOptions.embeddedSlots),
      ...(uploadDir ? { uploadDir } : {}),
      startupTimeoutMs: config.get(coreOptions.embeddedStartupTimeout),
      log: logger,
    });
    restUrl = embedded.restUrl;
  }
  const cluster = new JobManagerClient({
    baseUrl: restUrl,
    requestTimeoutMs: config.get(coreOptions.clusterRequestTimeout),
    runTimeoutMs: config.get(coreOptions.clusterRunTimeout),
  });
  const runs = new RunService({
    cluster,
    jarUriEnabled: config.get(coreOptions.jarUriEnable),
    dedupeRetentionMs: config.get(coreOptions.runDedupeRetention),
  });
  let draining = false;
  const app = createApp({
    logger,
    cluster,
    runs,
    uploadMaxBytes: config.get(coreOptions.uploadMaxSize),
    isDraining: () => draining,
  });
  return {
    app,
    config,
    cluster,
    ...(embedded ? { embedded } : {}),
    async close(server?: Server) {
      draining = true;
      if (server) {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
      }
      await cluster.close();
      await embedded?.stop();
    },
  };
}
