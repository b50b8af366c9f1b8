import type { NextFunction, Request, Response } from 'express';
import type { AuditLog } from '../audit/audit-log';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';
import { GatewayError } from '../errors/gateway-error';
import { pathViews } from './canonical-path';
import { answerClassOfSegments } from './jobmanager-answers';

/**
 * What a request does, for per-principal permissions (`gateway.auth.permission.<action>`):
 * - read: GET/HEAD/OPTIONS — job and cluster state, the Web UI, jar lists, gateway status;
 * - submit: upload, fetch (POST /gateway/v1/jars/fetch, or its alias POST /jars/fetch), plan, run
 *   and delete jars, and POST /v1/jobs (a job graph). A plan is
 *   a submission: Flink runs the jar's main method to build it;
 * - cancel: everything else that changes state — cancel, stop, savepoints, checkpoints, rescaling,
 *   DELETE /cluster — and Flink's legacy GET /jobs/:jobid/yarn-cancel and yarn-stop;
 * - logs: on top of the above, what the JobManager cannot filter — logs, stdout, thread dumps,
 *   profiler runs, flame graphs (`jobmanager-answers.ts`, class `diagnostics`).
 * Decided on both views of the path (exactly the route Flink's router takes, and the decoded-until-
 * stable one; see `pathViews`); a request needs every action either view implies, so no encoding
 * lowers what it needs. Paths whose meaning is not single are refused before this (`pathGuard`).
 */
export type Action = 'read' | 'submit' | 'cancel' | 'logs';

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

function viewOf(segments: string[]): string[] {
  const t = segments.filter(Boolean);
  return t[0] === 'v1' ? t.slice(1) : t;
}

function actionOfView(method: string, rest: string[]): Action {
  if (rest[0] === 'jars') return SAFE.has(method) && rest[2] !== 'plan' ? 'read' : 'submit';
  // The gateway's own jar routes (POST /gateway/v1/jars/fetch): what their /jars namesakes need.
  if (rest[0] === 'gateway' && rest[1] === 'v1' && rest[2] === 'jars') return SAFE.has(method) ? 'read' : 'submit';
  if (method === 'POST' && rest.length === 1 && rest[0] === 'jobs') return 'submit';
  if (SAFE.has(method)) {
    const last = rest[rest.length - 1];
    return last === 'yarn-cancel' || last === 'yarn-stop' ? 'cancel' : 'read';
  }
  return 'cancel';
}

/**
 * What a request needs and whether it is a job graph, from both views of its path (decoded once
 * here, for the permission check and the fetched-only policy alike).
 */
export function requestKind(method: string, rawPath: string): { actions: Set<Action>; jobGraph: boolean } {
  const m = method.toUpperCase();
  const parsed = pathViews(rawPath);
  // pathGuard refuses such paths before authorization; should one get here, it needs every permission.
  if (!parsed.ok) return { actions: new Set(['read', 'submit', 'cancel', 'logs']), jobGraph: m === 'POST' };
  const views = [parsed.flink, parsed.canonical].map(viewOf);
  const actions = new Set(views.map((rest) => actionOfView(m, rest)));
  if (views.some((rest) => answerClassOfSegments(rest) === 'diagnostics')) actions.add('logs');
  return {
    actions,
    // POST /v1/jobs: Flink's `flink run` path, a serialised job graph that no URI policy has seen.
    jobGraph: m === 'POST' && views.some((rest) => rest.length === 1 && rest[0] === 'jobs'),
  };
}

/** The actions a request needs (usually one). */
export function actionsOf(method: string, rawPath: string): Set<Action> {
  return requestKind(method, rawPath).actions;
}

/** POST /v1/jobs in any spelling of the path. */
export function isJobGraphSubmission(method: string, rawPath: string): boolean {
  return requestKind(method, rawPath).jobGraph;
}

/**
 * Why a state-changing request looks like a browser's cross-site request (CSRF), or undefined. A
 * browser marks every request with Sec-Fetch-Site (and cross-origin ones with Origin); Flink's
 * clients, curl and the operator send neither, so they are never refused here. A browser session
 * that the gateway trusts (a cookie, a client certificate, a proxy that adds credentials) cannot
 * be ridden by another site: anything but same-origin (or a user's own navigation) is refused.
 */
export function crossSiteProblem(req: Request): string | undefined {
  // Sec-Fetch-Site is a forbidden header (no page can set it) and browsers send it reliably; only
  // older browsers fall back to Origin, compared by host (a TLS-terminating proxy changes the scheme).
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin' || site === 'none' ? undefined : `Sec-Fetch-Site: ${site.slice(0, 40)}`;
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return undefined;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return `Origin: ${origin.slice(0, 100)}`;
  }
  const own = String(req.headers.host ?? '').toLowerCase();
  return host.toLowerCase() === own ? undefined : `Origin: ${origin.slice(0, 100)} is not this gateway (${own.slice(0, 100)})`;
}

/** The permission lists; `logs` defaults to nobody. */
export type PermissionLists = Record<Exclude<Action, 'logs'>, readonly string[]> & { logs?: readonly string[] };

/** The principals allowed each action: `token:<name>`, `cert:<CN>` or `*`. */
export class Permissions {
  private readonly lists: Record<Action, readonly string[]>;

  /** Entries were checked by the options registry (`gateway.auth.permission.*`). */
  constructor(lists: PermissionLists) {
    this.lists = { ...lists, logs: lists.logs ?? [] };
  }

  /** True when some list is narrower than "everyone": then authentication must be on. */
  get restricted(): boolean {
    return Object.values(this.lists).some((l) => !l.includes('*'));
  }

  /** The entry that allows `principal` to do `action`, or undefined. */
  allows(principal: string, action: Action): string | undefined {
    const list = this.lists[action];
    if (list.includes(principal)) return principal;
    return list.includes('*') ? '*' : undefined;
  }
}

export interface AuthorizationDeps {
  permissions: Permissions;
  policyMode: 'open' | 'fetched-only';
  /** `gateway.tokens.unregistered-jobs` when delegation tokens are on: `cancel` refuses POST /v1/jobs. */
  unregisteredJobs?: 'register' | 'cancel' | 'ignore';
  audit?: AuditLog;
}

/**
 * After authentication: refuses what the principal may not do (403 GW_AUTH_FORBIDDEN), and in
 * fetched-only mode refuses POST /v1/jobs (403 GW_POLICY_FETCHED_ONLY). Open routes (probes, the
 * token bridge) are not subject to permissions. Denied submissions, job-graph submissions and
 * job-control calls (cancel, stop, savepoints, ...) get an audit record here; runs, plans and
 * fetches are audited where they are handled.
 */
export function authorization(deps: AuthorizationDeps) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (res.locals.openRoute === true) {
      next();
      return;
    }
    const path = req.originalUrl.split('?')[0] ?? '/';
    const principal: string = res.locals.principal ?? 'anonymous';
    const reqId: string = res.locals.reqId ?? '';
    const started = performance.now();
    const { actions, jobGraph } = requestKind(req.method, path);
    const audit = (
      outcome: 'denied' | 'accepted' | 'rejected' | 'failed',
      status: number,
      verdicts: Record<string, string>,
      error?: string,
    ) =>
      deps.audit?.submission({
        principal,
        reqId,
        route: jobGraph ? 'job-graph' : `${req.method} ${path}`,
        verdicts,
        outcome,
        status,
        ...(error ? { error } : {}),
        durationMs: Math.round(performance.now() - started),
      });
    const control = (
      outcome: 'denied' | 'accepted' | 'rejected' | 'failed',
      status: number,
      verdicts: Record<string, string>,
      error?: string,
    ) => {
      const jobId = /\/jobs\/([0-9a-f]{32})(?:\/|$)/.exec(path)?.[1];
      deps.audit?.control({
        principal,
        reqId,
        method: req.method,
        path: path.slice(0, 300),
        ...(jobId ? { jobId } : {}),
        verdicts,
        outcome,
        status,
        ...(error ? { error } : {}),
        durationMs: Math.round(performance.now() - started),
      });
    };
    const crossSite = actions.has('submit') || actions.has('cancel') ? crossSiteProblem(req) : undefined;
    if (crossSite !== undefined) {
      if (actions.has('submit')) audit('denied', 403, { origin: crossSite }, 'GW_AUTH_CROSS_SITE');
      else control('denied', 403, { origin: crossSite }, 'GW_AUTH_CROSS_SITE');
      next(new GatewayError('GW_AUTH_CROSS_SITE', { reason: crossSite }));
      return;
    }
    const granted: string[] = [];
    for (const action of actions) {
      const entry = deps.permissions.allows(principal, action);
      if (entry === undefined) {
        if (action === 'submit') audit('denied', 403, { permission: `${action}: denied` }, 'GW_AUTH_FORBIDDEN');
        else if (action === 'cancel' || (action === 'logs' && actions.has('cancel')))
          control('denied', 403, { permission: `${action}: denied` }, 'GW_AUTH_FORBIDDEN');
        next(new GatewayError('GW_AUTH_FORBIDDEN', { principal, action, route: `${req.method} ${path.slice(0, 200)}` }));
        return;
      }
      granted.push(`${action}: ${entry}`);
    }
    res.locals.permission = granted.join(', ');
    if (actions.has('cancel') && !actions.has('submit')) {
      // Who cancelled, stopped or rescaled a job, and what the JobManager said.
      res.on('finish', () =>
        control(res.statusCode < 400 ? 'accepted' : res.statusCode < 500 ? 'rejected' : 'failed', res.statusCode, {
          permission: res.locals.permission as string,
        }),
      );
    }
    if (jobGraph) {
      const verdicts = { permission: res.locals.permission as string, policy: deps.policyMode };
      if (deps.policyMode === 'fetched-only') {
        audit('denied', 403, verdicts, 'GW_POLICY_FETCHED_ONLY');
        next(new GatewayError('GW_POLICY_FETCHED_ONLY', { what: 'POST /v1/jobs (a job graph from flink run)' }));
        return;
      }
      if (deps.unregisteredJobs === 'cancel') {
        // A job graph's configuration cannot be read, so it cannot be registered before it starts.
        audit('denied', 403, { ...verdicts, tokens: 'unregistered-jobs: cancel' }, 'GW_POLICY_UNREGISTERED_JOBS');
        next(new GatewayError('GW_POLICY_UNREGISTERED_JOBS', { what: 'POST /v1/jobs (a job graph from flink run or the SQL gateway)' }));
        return;
      }
      // Passed through unexamined: the record says who sent it and what the JobManager answered.
      res.on('finish', () =>
        audit(res.statusCode < 400 ? 'accepted' : res.statusCode < 500 ? 'rejected' : 'failed', res.statusCode, verdicts),
      );
    }
    next();
  };
}

/**
 * The permission lists, as configured (`gateway.auth.permission.*`). Without authentication every
 * caller is the one principal `anonymous` and every list must allow `*` (a start-up rule): the
 * gateway is as open as the JobManager behind it. `logs`, which names nobody by default, follows
 * that: open without authentication, so a gateway on loopback shows the Web UI's log pages.
 */
export function permissionListsOf(config: Configuration): Record<Action, readonly string[]> {
  const authenticated =
    config.getOptional(coreOptions.authTokensFile) !== undefined || config.getOptional(coreOptions.tlsClientCa) !== undefined;
  return {
    read: config.get(coreOptions.permissionRead),
    submit: config.get(coreOptions.permissionSubmit),
    cancel: config.get(coreOptions.permissionCancel),
    logs: authenticated ? config.get(coreOptions.permissionLogs) : ['*'],
  };
}
