import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An HTTP reverse proxy on 127.0.0.1 whose upstream can change: one address for a server that restarts on a new port. */
export interface HttpRelay {
  url: string;
  port: number;
  /** Sends requests arriving from now on to `target` (`http://127.0.0.1:<port>`). */
  retarget(target: string): void;
  stop(): Promise<void>;
}

/**
 * A node:http relay: each request is sent to the current upstream with its method, path, headers
 * and body, and the answer relayed as it comes. Keep-alive on each side is node's own, so a client
 * that reuses its connections (the gateway's JobManager client) never sees an upstream's restart.
 */
export async function startHttpRelay(initialTarget: string): Promise<HttpRelay> {
  let target = new URL(initialTarget);
  const server: Server = createServer((req, res) => {
    const upstream = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end('relay: upstream unreachable');
      else res.destroy();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    retarget: (t) => {
      target = new URL(t);
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
