import { Router } from 'express';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import { sendJson } from './responses';

export interface GatewayRouteDeps {
  cluster: JobManagerClient;
  isDraining: () => boolean;
}

/** The gateway's own routes under /gateway/v1 (not Flink paths). */
export function createGatewayRoutes(deps: GatewayRouteDeps): Router {
  const router = Router();
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
  return router;
}
