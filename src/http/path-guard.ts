import type { NextFunction, Request, Response } from 'express';
import { GatewayError } from '../errors/gateway-error';
import { pathViews } from './canonical-path';

/**
 * First after the request context, for every route (owned, pass-through, probes): refuses a path
 * that Flink's router could read differently from the gateway's permission and route checks (a raw
 * '#', an encoded '?' or '#', control characters, malformed or non-UTF-8 escapes; see `pathViews`),
 * with 400 GW_ROUTE_AMBIGUOUS. Nothing such is forwarded, so what is decided is what Flink acts on.
 */
export function pathGuard() {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const q = req.originalUrl.indexOf('?');
    const rawPath = q >= 0 ? req.originalUrl.slice(0, q) : req.originalUrl;
    const views = pathViews(rawPath);
    if (!views.ok) {
      next(
        new GatewayError('GW_ROUTE_AMBIGUOUS', { path: Array.from(rawPath).slice(0, 200).join('').toWellFormed(), reason: views.reason }),
      );
      return;
    }
    next();
  };
}
