import type { Express } from 'express';
import type { Logger } from 'pino';
import type { ArtifactsFeature } from '../artifacts/create-artifacts';
import { zipLimitsOf } from '../artifacts/options';
import type { AuditLog } from '../audit/audit-log';
import type { ClusterFeature } from '../cluster/create-cluster';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';
import type { Metrics } from '../metrics';
import type { TokenManager } from '../plugin-kit/token-spi';
import type { SubmissionFeature } from '../submission/create-submission';
import type { TokenDelivery } from '../tokens/token-delivery';
import { createApp } from './app';
import { Authenticator, authOptionsOf } from './auth';
import { Permissions, permissionListsOf } from './authorization';
import { gatewaySecretRule } from './configuration-filter';
import { bridgeEndpoint } from './token-bridge-route';

export interface HttpFeature {
  app: Express;
  /** From now on the gateway takes no new requests (draining before close). */
  drain(): void;
  /** The secrets directory changed: configuration answers relayed from the JobManager hide the new values (an invalid configuration keeps the previous rule). */
  reloadSecrets(current: () => Configuration): void;
}

/** The HTTP surface over the features: authentication, authorization, routes and the pass-through to the JobManager. */
export function createHttp(o: {
  config: Configuration;
  logger: Logger;
  cluster: ClusterFeature;
  artifacts: Pick<ArtifactsFeature, 'cache' | 'fetches'>;
  submission: SubmissionFeature;
  tokens: TokenManager;
  delivery: TokenDelivery | undefined;
  audit: AuditLog;
  metrics: Metrics;
  haStatus: (() => unknown) | undefined;
}): HttpFeature {
  const { config, logger, submission, tokens, audit } = o;
  const { registrations, unregistered } = submission;
  let draining = false;
  // What configuration answers relayed from the JobManager must hide; known secret values follow rotation.
  let answerSecrets = gatewaySecretRule(config);
  const tokenBridge = bridgeEndpoint(o.delivery, tokens);
  const policyMode = config.get(coreOptions.policyMode);
  const app = createApp({
    logger,
    cluster: o.cluster.cluster,
    runs: submission.runs,
    uploadMaxBytes: config.get(coreOptions.uploadMaxSize),
    zipLimits: zipLimitsOf(config),
    uploadSpoolDir: o.artifacts.cache.tmpDir,
    handoff: submission.handoff,
    jsonLimitBytes: config.get(coreOptions.maxJsonBody),
    isDraining: () => draining,
    fetches: o.artifacts.fetches,
    tokens,
    restorePending: () => registrations.pendingRestores(),
    metrics: o.metrics,
    ...(tokenBridge ? { tokenBridge } : {}),
    ...(unregistered ? { jobGraphs: unregistered, registeredJobs: () => registrations.list() } : {}),
    ...(o.haStatus ? { haStatus: o.haStatus } : {}),
    auth: new Authenticator(authOptionsOf(config, logger.child({ component: 'auth' }))),
    authorization: {
      permissions: new Permissions(permissionListsOf(config)),
      policyMode,
      audit,
      ...(unregistered ? { unregisteredJobs: unregistered.policy } : {}),
    },
    answerSecrets: () => answerSecrets,
    clusterVersion: o.cluster.version,
  });
  return {
    app,
    drain: () => {
      draining = true;
    },
    reloadSecrets(current) {
      try {
        answerSecrets = gatewaySecretRule(current());
      } catch {
        // Invalid: the plugins' reload logged why; the previous rule stays.
      }
    },
  };
}
