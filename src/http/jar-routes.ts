import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import type { ZipLimits } from '../artifacts/zip-bounds';
import type { JarHandoff } from '../cluster/jar-handoff';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import { type ClusterVersion, hasApplications } from '../cluster/flink-version';
import { GatewayError } from '../errors/gateway-error';
import { isWebSubmitDisabled, withFlinkErrors } from '../cluster/flink-errors';
import { parseJarRequest } from '../submission/run-request';
import type { RunService } from '../submission/run-service';
import { type Classification, classify, GATEWAY_FETCH_PATH, isBareJarId, isGatewayFetch } from './canonical-path';
import { uploadJar } from './jar-upload';
import { JsonBudget, readJsonObject } from './json-body';
import { sendJson } from './responses';

export interface JarRouteDeps {
  cluster: JobManagerClient;
  runs: RunService;
  uploadMaxBytes: number;
  /** Zip-structure bounds an uploaded jar must keep (gateway.artifacts.max-zip-entries and co.). */
  zipLimits?: ZipLimits;
  /** Where uploads are spooled while they are checked (a private directory). */
  uploadSpoolDir?: string;
  /** How uploads reach the JobManager: a shared-dir hand-off links them into its jar directory (ADR 0019); else they stream to it. */
  handoff?: JarHandoff;
  /**
   * Largest JSON body accepted on run/plan/fetch (gateway.http.max-json-body, 4 MiB by default):
   * far below Flink's own bound, rest.server.max-content-length (104857600 bytes, 100 MiB, in 1.20
   * to 2.3), since the gateway holds each body in memory while it checks it.
   */
  jsonLimitBytes?: number;
  /**
   * The fronted JobManager's Flink version: run-application exists from 2.3 on. Without it the
   * route is served and the JobManager's own answer (404 before 2.3) decides.
   */
  clusterVersion?: ClusterVersion;
}

/** When POST /jars/fetch became a deprecated alias of POST /gateway/v1/jars/fetch: 2026-12-06 (RFC 9745 date). */
const FETCH_ALIAS_DEPRECATED = '@1796515200';

/**
 * Owns Flink's jar routes (with and without /v1) and the gateway's POST /gateway/v1/jars/fetch.
 * Ownership is decided on the canonical path (see canonical-path.ts); a /jars route the gateway does
 * not know, and everything else, falls through to the pass-through.
 */
export function createJarRoutes(deps: JarRouteDeps) {
  const jsonLimit = deps.jsonLimitBytes ?? 4 * 1024 ** 2;
  const jsonBudget = new JsonBudget(16);

  return async function jarRoutes(req: Request, res: Response, next: NextFunction): Promise<void> {
    const rawUrl = req.originalUrl;
    const q = rawUrl.indexOf('?');
    const rawPath = q >= 0 ? rawUrl.slice(0, q) : rawUrl;
    const query = q >= 0 ? rawUrl.slice(q) : '';
    const c: Classification = isGatewayFetch(req.method, rawPath)
      ? { kind: 'jar', route: 'fetch', versioned: false }
      : classify(req.method, rawPath);
    if (c.kind === 'pass-through') return next();
    const log: Logger = res.locals.log;
    let clientGone = false;
    res.once('close', () => {
      if (!res.writableFinished) clientGone = true;
    });
    const caller = {
      principal: String(res.locals.principal ?? 'anonymous'),
      reqId: String(res.locals.reqId ?? ''),
      ...(res.locals.permission ? { permission: String(res.locals.permission) } : {}),
      clientGone: () => clientGone,
    };
    try {
      if (c.kind === 'jar-noncanonical') throw new GatewayError('GW_ROUTE_NONCANONICAL', { path: rawPath });
      if (c.kind === 'jar-not-found') throw new GatewayError('GW_ROUTE_NOT_FOUND', { uri: rawUrl });
      if (c.jarId !== undefined && !isBareJarId(c.jarId))
        throw new GatewayError('GW_JAR_ID_INVALID', { jarId: Array.from(c.jarId).slice(0, 300).join('').toWellFormed() });
      const jarId = c.jarId ?? '';
      switch (c.route) {
        case 'list':
          // The listing also tells the jar budget which kept jars have left the JobManager.
          return sendJson(res, 200, await deps.runs.listJars(query));
        case 'upload': {
          // One jar of the caller's budget, reserved before the body is read and charged as it arrives.
          const result = await deps.runs.keepUpload(caller.principal, (budget) =>
            uploadJar(req, {
              cluster: deps.cluster,
              ...(deps.handoff ? { handoff: deps.handoff } : {}),
              maxBytes: deps.uploadMaxBytes,
              log,
              ...(deps.zipLimits ? { zipLimits: deps.zipLimits } : {}),
              ...(deps.uploadSpoolDir ? { spoolBase: deps.uploadSpoolDir } : {}),
              ...budget,
            }),
          );
          return sendJson(res, 200, result.body);
        }
        case 'fetch': {
          // POST /jars/fetch sits in Flink's namespace: a deprecated alias of the gateway's own route (RFC 9745, RFC 8288).
          if (!isGatewayFetch(req.method, rawPath)) {
            res.setHeader('deprecation', FETCH_ALIAS_DEPRECATED);
            res.setHeader('link', `<${GATEWAY_FETCH_PATH}>; rel="successor-version"`);
          }
          const body = await readJsonObject(req, 64 * 1024, 'JarFetchRequestBody');
          if (typeof body.uri !== 'string' || body.uri.trim() === '') {
            throw new GatewayError('GW_REQUEST_MALFORMED', {
              type: 'JarFetchRequestBody',
              reason: 'uri must be a non-empty string, e.g. {"uri":"s3://bucket/app.jar"}',
            });
          }
          if (body.sha256 !== undefined && body.sha256 !== null && typeof body.sha256 !== 'string') {
            throw new GatewayError('GW_REQUEST_MALFORMED', {
              type: 'JarFetchRequestBody',
              reason: 'sha256 must be a string of 64 hexadecimal characters',
            });
          }
          return sendJson(res, 200, await deps.runs.fetchJar(body.uri, (body.sha256 as string | undefined) ?? undefined, log, caller));
        }
        case 'delete': {
          deps.runs.checkJarOwner(jarId, caller.principal, 'delete');
          const r = await deps.cluster.json('DELETE', `/v1/jars/${encodeURIComponent(jarId)}${query}`, { operation: 'delete jar' });
          if (r.status === 200) {
            deps.runs.forgetJar(jarId);
            return sendJson(res, 200, r.body);
          }
          if (isWebSubmitDisabled(r.status, r.body))
            throw withFlinkErrors(new GatewayError('GW_CLUSTER_SUBMIT_DISABLED', { operation: 'delete jar' }), r);
          if (r.status === 400 || r.status === 404) {
            // Not there (any more): whatever the gateway kept of it goes.
            deps.runs.forgetJar(jarId);
            // Flink answers 400 (not 404) for an unknown jar; keep that, the operator relies on it.
            throw withFlinkErrors(new GatewayError('GW_JAR_NOT_FOUND', { flinkMessage: `File ${jarId} does not exist` }), r);
          }
          throw deps.cluster.failure('delete jar', r);
        }
        case 'plan': {
          deps.runs.checkJarOwner(jarId, caller.principal, 'plan');
          // Flink's GET plan takes a JarPlanRequestBody too (its Web UI and older clients send one):
          // parsed like a POST's and sent on as a POST, the same handler on the JobManager.
          const withBody =
            req.method === 'POST' || req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
          const request = withBody
            ? parseJarRequest(await readJsonObject(req, jsonLimit, 'JarPlanRequestBody', jsonBudget), 'JarPlanRequestBody')
            : undefined;
          const plan = await deps.runs.plan({ jarId, request, query, method: withBody ? 'POST' : 'GET', log, caller });
          return sendJson(res, 200, plan);
        }
        case 'run': {
          deps.runs.checkJarOwner(jarId, caller.principal, 'run');
          const request = parseJarRequest(await readJsonObject(req, jsonLimit, 'JarRunRequestBody', jsonBudget), 'JarRunRequestBody');
          const { outcome } = await deps.runs.run({ jarId, request, query, log, caller });
          // As the fronted version answers: {jobid}, plus applicationId from Flink 2.3 on.
          return sendJson(res, 200, { jobid: outcome.jobid, ...(outcome.applicationId ? { applicationId: outcome.applicationId } : {}) });
        }
        case 'run-application': {
          // Answer as the fronted version would: before Flink 2.3 there is no such route (404).
          const version = await deps.clusterVersion?.get();
          if (version !== undefined && !hasApplications(version)) throw new GatewayError('GW_ROUTE_NOT_FOUND', { uri: rawUrl });
          // The same pipeline as /run: owner, policy, fetch by URI, token registration, audit.
          deps.runs.checkJarOwner(jarId, caller.principal, 'run');
          const request = parseJarRequest(
            await readJsonObject(req, jsonLimit, 'JarRunApplicationRequestBody', jsonBudget),
            'JarRunApplicationRequestBody',
          );
          const { outcome } = await deps.runs.run({ jarId, request, query, log, caller, route: 'run-application' });
          return sendJson(res, 202, { applicationid: outcome.applicationid });
        }
      }
    } catch (err) {
      next(err);
    }
  };
}
