import type { NextFunction, Request, Response } from 'express';
import { GatewayError } from '../errors/gateway-error';

/**
 * While the gateway drains (SIGTERM): every response closes its connection, so keep-alive clients
 * (Flink's Java client, browsers) do not hold the process open until their idle timeout; new work
 * gets 503 with Retry-After; liveness and readiness keep answering (readiness says "draining").
 */
export function drainGate(isDraining: () => boolean) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!isDraining()) {
      next();
      return;
    }
    res.setHeader('connection', 'close');
    if (/^\/gateway\/v1\/(health|ready)$/.test(req.path)) {
      next();
      return;
    }
    const err = new GatewayError('GW_GATEWAY_DRAINING');
    err.headers = { 'retry-after': '5', connection: 'close' };
    next(err);
  };
}
