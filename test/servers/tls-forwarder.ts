import { createServer, type Server } from 'node:http';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';

/**
 * A plain-HTTP front for an HTTPS test server (127.0.0.1, port 0), for fixture clients that cannot be
 * given a CA (the Azure SDK's own transport): each request is forwarded unchanged over TLS, checked
 * against `ca`. Shared-key signatures do not cover the host, so they stay valid.
 */
export async function startTlsForwarder(target: string, ca: string): Promise<{ url: string; stop(): Promise<void> }> {
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    const up = request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers, ca }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
