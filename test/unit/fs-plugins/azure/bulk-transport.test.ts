import * as dns from 'node:dns';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WebResource } from '@azure/storage-blob';
import { bulkTransport } from '../../../../fs-plugins/azure/bulk-transport';
import { BulkHttpClient } from '../../../../src/download/bulk-http';
import type { ConnectGuard } from '../../../../src/plugin-kit/fs-plugin';

const permissive: ConnectGuard = { enabled: false, lookup: dns.lookup, lookupFor: () => dns.lookup, checkHost() {} };

/** An AbortSignalLike that is not a global AbortSignal (as the SDK may hand one), counting its listeners. */
function foreignSignal() {
  const listeners = new Set<() => void>();
  return {
    aborted: false,
    listeners,
    addEventListener: (_: 'abort', l: () => void) => listeners.add(l),
    removeEventListener: (_: 'abort', l: () => void) => listeners.delete(l),
  };
}

function request(url: string, signal: ReturnType<typeof foreignSignal>, stream: boolean, method = 'GET'): WebResource {
  return {
    url,
    method,
    headers: { rawHeaders: () => ({}) },
    abortSignal: signal,
    ...(stream ? { streamResponseStatusCodes: new Set([200]) } : {}),
  } as unknown as WebResource;
}

describe('Azure plugin: the SDK transport over the bulk client', () => {
  let server: Server;
  let base: string;
  const bulk = new BulkHttpClient({ guard: permissive, connectTimeoutMs: 2000, readTimeoutMs: 2000 });
  beforeAll(async () => {
    server = createServer((req, res) => res.end(req.method === 'HEAD' ? undefined : 'blob bytes')).listen(0, '127.0.0.1');
    await once(server, 'listening');
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await bulk.close();
    server.close();
  });

  it("leaves no listener on the SDK's signal once a response is read, whatever its kind", async () => {
    const signal = foreignSignal();
    const transport = bulkTransport(bulk);
    for (let i = 0; i < 20; i++) {
      expect((await transport.sendRequest(request(`${base}/c/b`, signal, false))).bodyAsText).toBe('blob bytes');
      await transport.sendRequest(request(`${base}/c/b`, signal, false, 'HEAD'));
      const streamed = await transport.sendRequest(request(`${base}/c/b`, signal, true));
      expect(signal.listeners.size).toBe(1); // the streamed body can still be aborted
      const chunks: Buffer[] = [];
      for await (const c of streamed.readableStreamBody!) chunks.push(c as Buffer);
      expect(Buffer.concat(chunks).toString()).toBe('blob bytes');
      await new Promise((r) => setImmediate(r));
      expect(signal.listeners.size).toBe(0);
    }
  });
});
