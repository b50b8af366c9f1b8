import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Origin {
  url: string;
  server: Server;
  close(): Promise<void>;
}

/** A real node:http server on an ephemeral loopback port. */
export async function startOrigin(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Origin> {
  const server = createServer({ requestTimeout: 0 }, handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
