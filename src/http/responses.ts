import type { Response } from 'express';

/**
 * JSON the way Flink's REST endpoint writes it: `application/json; charset=UTF-8` and the CORS
 * header its handlers always add.
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(text),
    'access-control-allow-origin': '*',
  });
  res.end(text);
}
