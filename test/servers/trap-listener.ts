import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface TrapListener {
  /** The address it listens on (`127.0.0.2`, `::1`, ...). */
  host: string;
  port: number;
  /** `http://<host>:<port>` (IPv6 in brackets). */
  url: string;
  /** TCP connections accepted so far: the number an SSRF test asserts to be 0. */
  accepted: number;
  /** Remote addresses of the accepted connections, for the failure message. */
  from: string[];
  stop(): Promise<void>;
}

/**
 * A listener standing in for something a fetch must never reach (a metadata service, an admin
 * port on loopback). It counts every accepted TCP connection, whatever follows, and, to make a
 * leak obvious rather than a mere connection error, answers any HTTP request with `body` (a
 * valid jar): a guard that let the request through would see a successful fetch.
 */
export async function startTrapListener(host: string, body: Buffer, port = 0): Promise<TrapListener> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/java-archive', 'content-length': String(body.length), etag: '"trap"' });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  const trap: TrapListener = {
    host,
    port: 0,
    url: '',
    accepted: 0,
    from: [],
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  server.on('connection', (socket: Socket) => {
    trap.accepted++;
    trap.from.push(`${socket.remoteAddress}:${socket.remotePort}`);
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  trap.port = (server.address() as AddressInfo).port;
  trap.url = `http://${host.includes(':') ? `[${host}]` : host}:${trap.port}`;
  return trap;
}
