import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';

const SAFE_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Gives each request an id (a caller's `x-request-id` when it is safe to echo) and a child
 * logger, and logs one line when the response is done. Only the path is logged: query strings can
 * carry signed-URL credentials, and bodies and flinkConfiguration values are never logged.
 */
export function requestContext(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const given = req.headers['x-request-id'];
    const reqId = typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
    const log = logger.child({ reqId });
    res.locals.log = log;
    res.locals.reqId = reqId;
    res.setHeader('x-request-id', reqId);
    const started = performance.now();
    // A response sent before its request's body was read to the end (a refusal, a GET whose body is
    // ignored): close the connection rather than keep reading whatever the client still drips in.
    const socket = req.socket;
    res.once('finish', () => {
      if (req.complete) return;
      socket.end();
      setTimeout(() => socket.destroy(), 1000).unref();
    });
    res.on('close', () => {
      const path = req.originalUrl.split('?')[0];
      const ms = Math.round((performance.now() - started) * 10) / 10;
      const entry = { method: req.method, path, status: res.statusCode, ms, completed: res.writableFinished, principal: res.locals.principal };
      // res.locals.log may have gained the principal after authentication.
      const final: Logger = res.locals.log ?? log;
      if (res.statusCode >= 500) final.warn(entry, 'request failed');
      else final.debug(entry, 'request');
    });
    next();
  };
}
