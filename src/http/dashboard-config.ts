import type { NextFunction, Request, Response } from 'express';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { Permissions } from './authorization';
import { sendJson } from './responses';

export interface DashboardConfigDeps {
  cluster: JobManagerClient;
  permissions: Permissions;
  policyMode: 'open' | 'fetched-only';
}

/** The dashboard configuration routes, as the open-route list in auth.ts names them. */
const CONFIG_PATH = /^\/(v1\/)?config\/?$/;

/**
 * `GET /config` (and `/v1/config`), the Web UI's dashboard configuration, from the JobManager with
 * `features.web-submit` as this caller may use it: false when the principal may not submit, or
 * when the policy runs only jars fetched by URI (`fetched-only` refuses the uploaded jars the Web
 * UI's submit page runs) — so the dashboard hides a submit page that would only answer 403. Any
 * other answer of the JobManager, and every other key, is relayed as it is.
 */
export function dashboardConfig(deps: DashboardConfigDeps) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const path = req.originalUrl.split('?')[0] ?? '/';
    if (req.method !== 'GET' || !CONFIG_PATH.test(path)) return next();
    const principal = String(res.locals.principal ?? 'anonymous');
    const maySubmit = deps.policyMode === 'open' && deps.permissions.allows(principal, 'submit') !== undefined;
    if (maySubmit) return next();
    try {
      const r = await deps.cluster.json('GET', '/v1/config', { operation: 'dashboard configuration' });
      const body = r.body as { features?: unknown } | undefined;
      if (r.status !== 200 || r.notJson || typeof body?.features !== 'object' || body.features === null)
        return sendJson(res, r.status, r.body);
      sendJson(res, 200, { ...body, features: { ...(body.features as Record<string, unknown>), 'web-submit': false } });
    } catch (err) {
      next(err);
    }
  };
}
