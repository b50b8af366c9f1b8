import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream';

/** One request as it reached the relay: what the gateway sent towards the JobManager. */
export interface RelayedRequest {
  method: string;
  url: string;
  /** Every header, raw names as sent (`rawHeaders` pairs). */
  rawHeaders: string[];
  headers: IncomingHttpHeaders;
}

export interface RecordingRelay {
  url: string;
  requests: RelayedRequest[];
  stop(): Promise<void>;
}

/**
 * A node:http relay put between the gateway and a JobManager (`gateway.cluster.rest-url` names
 * the relay): records every request's method, path and headers, then forwards it unchanged, body
 * and answer streamed both ways. What it records is exactly what the JobManager would see.
 */
export async function startRecordingRelay(target: string): Promise<RecordingRelay> {
  const requests: RelayedRequest[] = [];
  const to = new URL(target);
  const server: Server = createServer({ requestTimeout: 0 }, (req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: [...req.rawHeaders], headers: { ...req.headers } });
    const upstream = httpRequest(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...req.headers, host: to.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        pipeline(answer, res, () => undefined);
      },
    );
    upstream.on('error', () => res.destroy());
    pipeline(req, upstream, () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
