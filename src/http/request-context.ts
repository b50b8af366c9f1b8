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
    // ignored): the connection is not used again, and it is closed only once the client has stopped
    // sending (below). Node's server closes a `connection: close` answer's socket through
    // `destroySoon` as soon as the answer is written: with request bytes still unread, that close is a
    // reset, which takes the answer with it when the client has not read it yet.
    const socket = req.socket as Request['socket'] & { destroySoon?: () => void };
    let dropping = false;
    const drop = () => {
      if (dropping) return;
      dropping = true;
      dropRestOfBody(req, socket);
    };
    res.once('prefinish', () => {
      if (!req.complete) socket.destroySoon = drop;
    });
    res.once('finish', () => {
      if (!req.complete) drop();
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
 * A lingering close: ends the connection after the answer (its FIN follows at once, so a keep-alive
 * client sends no further request on it) but reads and drops the rest of the body (Node's server
 * drops what its parser reads for a request whose response finished) until the client closes;
 * cuts the connection past `UNREAD_BODY_BYTES` more bytes or after `UNREAD_BODY_MS`. Closing while
 * the client is still sending resets the connection, and a client loses the answer it has not read
 * yet: Flink's RestClient (the CLI's `POST /v1/jobs`) then reports "Channel became inactive" instead
 * of the refusal, and so does any client that reads only after it has written, or reads late on a
 * busy machine. Only a client that sends on past the bound loses it.
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
