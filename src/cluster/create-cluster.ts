import type { Logger } from 'pino';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';
import { projectRoot } from '../project-root';
import { ClusterVersion } from './flink-version';
import { JobManagerClient, jobManagerClientOptions } from './jobmanager-client';
import { launchCluster } from './launch-cluster';

export interface ClusterFeature {
  cluster: JobManagerClient;
  /** The JobManager's web.upload.dir as the gateway sees it, when known (the shared-dir hand-off). */
  uploadDir: string | undefined;
  version: ClusterVersion;
}

/**
 * The JobManager: the one gateway.cluster.rest-url names, or a session cluster the gateway launches
 * (with the token bridge's keys `launch` carries), and the client every feature talks to it through.
 */
export async function createCluster(o: {
  config: Configuration;
  logger: Logger;
  launch: { flinkConfig: Record<string, string>; withTokenBridge: boolean };
  resources: AsyncDisposableStack;
}): Promise<ClusterFeature> {
  const { config, logger, resources } = o;
  let restUrl = config.getOptional(coreOptions.clusterRestUrl);
  let uploadDir = config.getOptional(coreOptions.jobManagerUploadDir);
  if (!restUrl) {
    const launched = resources.adopt(
      await launchCluster({ config, log: logger, rootDir: projectRoot(), ...(uploadDir ? { uploadDir } : {}), ...o.launch }),
      (c) => c.stop(),
    );
    restUrl = launched.restUrl;
    uploadDir = launched.uploadDir;
  }
  const cluster = resources.adopt(new JobManagerClient(jobManagerClientOptions(config, restUrl)), (c) => c.close());
  const version = new ClusterVersion(
    cluster,
    logger.child({ component: 'cluster-version' }),
    config.getOptional(coreOptions.clusterFlinkVersion),
  );
  return { cluster, uploadDir, version };
}
