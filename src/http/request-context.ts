import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';

const SAFE_ID = /^[A-Za-z0-9._-]{1,128}$/;
/** What is read and dropped of a body after its request was answered early, before the connection is cut. */
const UNREAD_BODY_BYTES = 8 * 1024 * 1024;
const UNREAD_BODY_MS = 5000;

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
    // ignored): the connection is not used again.
    const socket = req.socket;
    res.once('finish', () => {
      if (req.complete) return;
      if (String(res.getHeader('connection') ?? '').toLowerCase() === 'close') {
        // The handler already read what it meant to (an oversized upload's bounded drain).
        socket.end();
        setTimeout(() => socket.destroy(), 1000).unref();
        return;
      }
      dropRestOfBody(req, socket);
    });
    res.on('close', () => {
      const path = req.originalUrl.split('?')[0];
      const ms = Math.round((performance.now() - started) * 10) / 10;
      const entry = {
        method: req.method,
        path,
        status: res.statusCode,
        ms,
        completed: res.writableFinished,
        principal: res.locals.principal,
      };
      // res.locals.log may have gained the principal after authentication.
      const final: Logger = res.locals.log ?? log;
      if (res.statusCode >= 500) final.warn(entry, 'request failed');
      else final.debug(entry, 'request');
    });
    next();
  };
}

/**
 * Ends the connection after the answer (its FIN follows at once, so a keep-alive client sends no
 * further request on it) but lets the rest of the body be read and dropped (Node's server drops
 * what its parser reads for a request whose response finished); cuts the connection past
 * `UNREAD_BODY_BYTES` more bytes or after `UNREAD_BODY_MS`. A client that is still sending when the
 * connection is reset loses the answer it has not read yet: Flink's RestClient (the CLI's
 * `POST /v1/jobs`) then reports "Channel became inactive" instead of the refusal, and so does any
 * client that reads only after it has written.
 */
function dropRestOfBody(req: Request, socket: Request['socket']): void {
  socket.end();
  const start = socket.bytesRead;
  const stop = () => {
    clearInterval(watch);
    clearTimeout(timer);
  };
  const cut = () => {
    stop();
    socket.destroy();
  };
  const watch = setInterval(() => {
    if (!req.complete && socket.bytesRead - start > UNREAD_BODY_BYTES) cut();
  }, 20);
  const timer = setTimeout(cut, UNREAD_BODY_MS);
  watch.unref();
  timer.unref();
  socket.once('close', stop);
  req.resume();
}
