import express, { type Express } from 'express';
import type { Logger } from 'pino';
import type { FetchProgress } from '../artifacts/fetch-progress';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { Authenticator } from './auth';
import type { RunService } from '../submission/run-service';
import type { TokenStatus } from '../tokens/spi';
import type { TokenBridgeDeps } from './token-bridge-route';
import { errorMiddleware } from './error-middleware';
import { createGatewayRoutes } from './gateway-routes';
import { createJarRoutes } from './jar-routes';
import { Metrics } from '../metrics';
import { createPassThrough } from './pass-through';
import { drainGate } from './drain-gate';
import { requestContext } from './request-context';

export interface AppDeps {
  metrics?: Metrics;
  auth?: Authenticator;
  logger: Logger;
  cluster: JobManagerClient;
  runs: RunService;
  uploadMaxBytes: number;
  isDraining: () => boolean;
  fetches?: FetchProgress;
  tokens?: { status(): TokenStatus };
  tokenBridge?: TokenBridgeDeps;
}

/**
 * The HTTP surface: request context → gateway routes → jar routes (owned, decided on the canonical
 * path) → pass-through to the JobManager → error mapping. No body parser runs before routing.
 */
export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestContext(deps.logger));
  app.use(drainGate(deps.isDraining));
  if (deps.auth) app.use(deps.auth.middleware());
  app.use('/gateway/v1', createGatewayRoutes(deps));
  app.use(createJarRoutes(deps));
  const metrics = deps.metrics;
  app.use(createPassThrough(deps.cluster, deps.logger, metrics ? (status, seconds) => metrics.passThrough.observe({ status_class: Metrics.statusClass(status) }, seconds) : undefined));
  app.use(errorMiddleware(deps.logger));
  return app;
}
