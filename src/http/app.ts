import express, { type Express } from 'express';
import type { Logger } from 'pino';
import type { FetchProgress } from '../artifacts/fetch-progress';
import type { ZipLimits } from '../artifacts/zip-bounds';
import type { JarHandoff } from '../cluster/jar-handoff';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { ClusterVersion } from '../cluster/flink-version';
import type { Authenticator } from './auth';
import { authorization, type AuthorizationDeps } from './authorization';
import type { RunService } from '../submission/run-service';
import type { TokenStatus } from '../plugin-kit/token-spi';
import type { TokenBridgeDeps } from './token-bridge-route';
import type { JobGraphHook } from './job-graph-answer';
import { errorMiddleware } from './error-middleware';
import { createGatewayRoutes } from './gateway-routes';
import { createJarRoutes } from './jar-routes';
import { dashboardConfig } from './dashboard-config';
import { Metrics } from '../metrics';
import { createPassThrough } from './pass-through';
import type { SecretRule } from './configuration-filter';
import { drainGate } from './drain-gate';
import { requestContext } from './request-context';
import { pathGuard } from './path-guard';

export interface AppDeps {
  metrics?: Metrics;
  auth?: Authenticator;
  /** Permissions and the fetched-only policy for routes the gateway passes through. */
  authorization?: AuthorizationDeps;
  logger: Logger;
  cluster: JobManagerClient;
  runs: RunService;
  uploadMaxBytes: number;
  /** Zip-structure bounds an uploaded jar must keep (gateway.artifacts.max-zip-entries and co.). */
  zipLimits?: ZipLimits;
  /** gateway.http.max-json-body: the largest run, plan or fetch body. */
  jsonLimitBytes?: number;
  /** Where uploads are spooled while they are checked (a private directory). */
  uploadSpoolDir?: string;
  /** How uploads reach the JobManager: a shared-dir hand-off links them into its jar directory (ADR 0019). */
  handoff?: JarHandoff;
  isDraining: () => boolean;
  fetches?: FetchProgress;
  tokens?: { status(): TokenStatus };
  /** Running jobs whose re-registration after a restart is being retried. */
  restorePending?: () => unknown[];
  tokenBridge?: TokenBridgeDeps;
  /** Registers the job of an accepted POST /v1/jobs before its answer is relayed (docs/adr/0010). */
  jobGraphs?: JobGraphHook;
  /** The registered jobs and how each came to be registered, for GET /gateway/v1/tokens. */
  registeredJobs?: () => unknown[];
  /** HA: this gateway's role, for GET /gateway/v1/tokens. */
  haStatus?: () => unknown;
  /** What configuration listings relayed from the JobManager hide (default: Flink's word list and the name heuristic). */
  answerSecrets?: () => SecretRule;
  /** The fronted JobManager's Flink version (the routes that differ between versions). */
  clusterVersion?: ClusterVersion;
}

/**
 * The HTTP surface: request context → path guard → gateway routes → jar routes (owned, decided on the canonical
 * path) → pass-through to the JobManager → error mapping. No body parser runs before routing.
 */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestContext(deps.logger));
  // The gateway's own answers carry the CORS origin the JobManager's do (responses.ts).
  app.use((_req, res, next) => {
    res.locals.allowOrigin = () => deps.cluster.allowOrigin();
    next();
  });
  app.use(pathGuard());
  app.use(drainGate(deps.isDraining));
  if (deps.auth) app.use(deps.auth.middleware());
  if (deps.authorization) app.use(authorization(deps.authorization));
  app.use('/gateway/v1', createGatewayRoutes(deps));
  if (deps.authorization)
    app.use(
      dashboardConfig({ cluster: deps.cluster, permissions: deps.authorization.permissions, policyMode: deps.authorization.policyMode }),
    );
  app.use(createJarRoutes(deps));
  const metrics = deps.metrics;
  app.use(
    createPassThrough(
      deps.cluster,
      deps.logger,
      metrics ? (status, seconds) => metrics.passThrough.observe({ status_class: Metrics.statusClass(status) }, seconds) : undefined,
      deps.jobGraphs,
      deps.answerSecrets,
    ),
  );
  app.use(errorMiddleware(deps.logger, metrics ? (code, status) => metrics.errors.inc({ code, status: String(status) }) : undefined));
  return app;
}
