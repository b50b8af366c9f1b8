import { Router } from 'express';
import type { FetchProgress } from '../artifacts/fetch-progress';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { Metrics } from '../metrics';
import { GatewayError } from '../errors/gateway-error';
import type { TokenStatus } from '../plugin-kit/token-spi';
import { sendJson } from './responses';
import { type TokenBridgeDeps, tokenBridgeHandler } from './token-bridge-route';

export interface GatewayRouteDeps {
  cluster: JobManagerClient;
  isDraining: () => boolean;
  fetches?: FetchProgress;
  /** The delegation-token manager (its status only). */
  tokens?: { status(): TokenStatus };
  /** Running jobs whose re-registration after a restart is being retried. */
  restorePending?: () => unknown[];
  /** Registered jobs with their principal and how they came to be registered (submitted, job-graph, discovered). */
  registeredJobs?: () => unknown[];
  /** The token bridge endpoint; absent = 404 (tokens or the bridge disabled). */
  tokenBridge?: TokenBridgeDeps;
  metrics?: Metrics;
  /** HA (a shared store): this gateway's role, from Flink's leader record. */
  haStatus?: () => unknown;
}

/** The gateway's own routes under /gateway/v1 (not Flink paths). */
/**
 * What the per-job tokens do and do not isolate, said where an operator looks (docs/security.md).
 * A session cluster runs every job's main() in the JobManager's JVM and its tasks in shared
 * TaskManager JVMs: job code is one trust domain, whatever the gateway does.
 */
export const TOKEN_ISOLATION = {
  jobCode: 'shared',
  isolated: [
    'requests of different principals: permissions, job-id ownership, jar ownership, allow-lists tied to principals',
    'what a job may ask for: each job obtains only the containers, roles and scopes its principal is allowed',
  ],
  notIsolated: [
    "job code from job code: any job running in this cluster can read every token delivered to it (the JobManager holds the bridge secret and every job's tokens; TaskManagers are shared)",
  ],
  advice:
    "run one session cluster per trust domain (team); do not share a session cluster between parties that must not read each other's tokens",
} as const;

export function createGatewayRoutes(deps: GatewayRouteDeps): Router {
  const router = Router();
  // Prometheus text format; no label carries a URI, a job id or other unbounded value.
  router.get('/metrics', async (_req, res, next) => {
    if (!deps.metrics) return next(new GatewayError('GW_ROUTE_NOT_FOUND', { uri: '/gateway/v1/metrics' }));
    try {
      const text = await deps.metrics.registry.metrics();
      res.writeHead(200, { 'content-type': deps.metrics.registry.contentType }).end(text);
    } catch (err) {
      next(err);
    }
  });
  router.get('/health', (_req, res) => sendJson(res, 200, { status: 'UP' }));
  router.get('/ready', async (_req, res) => {
    if (deps.isDraining()) return sendJson(res, 503, { ready: false, reason: 'draining' });
    try {
      const r = await deps.cluster.json('GET', '/v1/config', { operation: 'readiness', timeoutMs: 2000 });
      if (r.status === 200) return sendJson(res, 200, { ready: true });
      return sendJson(res, 503, { ready: false, reason: `JobManager answered ${r.status}` });
    } catch {
      return sendJson(res, 503, { ready: false, reason: 'JobManager unreachable' });
    }
  });
  // Progress of jar fetches (URIs redacted): phase, bytes done/total, result.
  router.get('/fetches', (_req, res) => sendJson(res, 200, { fetches: deps.fetches?.list() ?? [] }));
  router.get('/fetches/:id', (req, res, next) => {
    const rec = deps.fetches?.get(req.params.id);
    if (!rec) return next(new GatewayError('GW_ROUTE_NOT_FOUND', { uri: req.originalUrl }));
    sendJson(res, 200, rec);
  });
  // Delegation-token status: providers, last obtain, next renewal, registered jobs, last error.
  // Never a token value: the manager's status holds none.
  router.get('/tokens', (_req, res) =>
    sendJson(res, 200, {
      ...(deps.tokens?.status() ?? { enabled: false, providers: [], registeredJobs: [] }),
      restorePending: deps.restorePending?.() ?? [],
      jobs: deps.registeredJobs?.() ?? [],
      isolation: TOKEN_ISOLATION,
      ...(deps.haStatus ? { ha: deps.haStatus() } : {}),
    }),
  );
  // The latest tokens themselves, for the Flink-side token bridge only (loopback + bridge secret).
  router.get('/tokens/bridge', tokenBridgeHandler(deps.tokenBridge));
  return router;
}
