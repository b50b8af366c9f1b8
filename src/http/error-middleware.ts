import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { errorBody, GatewayError, isGatewayError, logSafeMessage } from '../errors/gateway-error';
import { allowOriginOf } from './responses';

/**
 * The one place that maps errors to HTTP. Gateway errors carry their status and a message meant
 * for the client; anything else is a bug: 500 with the request id, the stack only in the log.
 */
export function errorMiddleware(fallbackLogger: Logger, onError?: (code: string, status: number) => void) {
  // Express recognises error middleware by its four parameters.
  return (err: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const log: Logger = res.locals.log ?? fallbackLogger;
    let gw: GatewayError;
    if (isGatewayError(err)) {
      gw = err;
      const entry = { code: gw.code, status: gw.status, path: req.originalUrl.split('?')[0] };
      if (gw.status >= 500) log.warn(entry, logSafeMessage(gw));
      else log.info(entry, logSafeMessage(gw));
    } else {
      gw = new GatewayError('GW_INTERNAL_ERROR', { requestId: String(res.locals.reqId ?? 'unknown') });
      log.error({ err }, 'unexpected error');
    }
    onError?.(gw.code, gw.status);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const text = JSON.stringify(errorBody(gw));
    res.writeHead(gw.status, {
      'content-type': 'application/json; charset=UTF-8',
      'content-length': Buffer.byteLength(text),
      'access-control-allow-origin': allowOriginOf(res),
      // Every 503 is temporary (JobManager restarting, queue full, draining): say when to retry.
      ...(gw.status === 503 ? { 'retry-after': '5' } : {}),
      ...gw.headers,
    });
    res.end(text);
  };
}
