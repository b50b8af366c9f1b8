import type { Response } from 'express';

/**
 * JSON the way Flink's REST endpoint writes it: `application/json; charset=UTF-8` and the CORS
 * header its handlers always add, with the JobManager's value (`allowOriginOf`).
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(text),
    'access-control-allow-origin': allowOriginOf(res),
  });
  res.end(text);
}

/**
 * The `Access-Control-Allow-Origin` Flink's handlers would send (its `web.access-control-allow-origin`,
 * default `*`): what the app put in `res.locals.allowOrigin` (the JobManager's own value, as learnt).
 */
export function allowOriginOf(res: Response): string {
  const source = res.locals.allowOrigin as (() => string) | undefined;
  return source?.() ?? '*';
}
