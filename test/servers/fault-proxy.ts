import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/** What the proxy does to one connection (one request: the proxy makes every connection carry one). */
export type Fault =
  | { kind: 'pass' }
  /**
   * Forwards `afterBytes` bytes of the response (headers included), then resets the client's TCP
   * connection — once `until` resolved, when given (a reset at a known point of the client's work,
   * not at whatever point a race reached).
   */
  | { kind: 'reset'; afterBytes: number; until?: () => Promise<unknown> }
  /** Forwards `afterBytes` bytes of the response, then sends nothing more until the client gives up. */
  | { kind: 'stall'; afterBytes: number }
  /** Forwards the whole response at `bytesPerSecond`. */
  | { kind: 'drip'; bytesPerSecond: number }
  /**
   * Answers the request itself with this status (`Connection: close`); the store never sees it. The
   * body is `injected <status>` as text/plain, or `body` as application/json when given.
   */
  | { kind: 'status'; status: number; body?: string }
  /**
   * Drops the response's `Content-Length`, and ends the connection cleanly (FIN, no reset) after
   * `afterBodyBytes` body bytes: a truncation the HTTP layer cannot see.
   */
  | { kind: 'truncate'; afterBodyBytes: number }
  /** Flips one bit of the body byte at `atBodyByte`, everything else unchanged: a wrong jar of the right size. */
  | { kind: 'corrupt'; atBodyByte: number }
  /** Forwards the request, then holds the whole response for `ms` before passing it on: a slow upstream. */
  | { kind: 'delay'; ms: number }
  /** Reads the request and never answers; the upstream never sees it: a server that accepted the connection and hung. */
  | { kind: 'blackhole' }
  /**
   * Reads the request head, then closes the connection without answering (FIN; RST with `reset`);
   * the upstream never sees it. The client cannot tell this from a server that died mid-request.
   */
  | { kind: 'close'; reset?: boolean };

/** The request a connection carries, as the plan sees it. */
export interface ProxiedRequest {
  /** 0 for the first connection. */
  index: number;
  method: string;
  path: string;
}

export interface FaultProxy {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  port: number;
  /** Requests seen, with the fault applied to each. */
  log: (ProxiedRequest & { fault: Fault['kind'] })[];
  /** Replaces the plan for connections accepted from now on. */
  setPlan(plan: (req: ProxiedRequest) => Fault): void;
  /**
   * Stops listening: new connections are refused (ECONNREFUSED), as by a server that is down or
   * restarting; connections already open carry on. `resume()` listens on the same port again.
   */
  pause(): void;
  resume(): Promise<void>;
  stop(): Promise<void>;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const TICK_MS = 100;

/**
 * A TCP proxy on 127.0.0.1, port 0, in front of one HTTP store (an origin, the S3 server), that
 * injects faults per request: reset after N bytes, stall, drip at R B/s, an error status, a silent
 * truncation, a flipped byte, a delayed or missing answer, a connection closed unanswered; and it
 * can stop listening for a while (a restart). It rewrites each request's `Connection` header to `close`, so every
 * connection carries exactly one request and byte counts are per response. Sockets it opened are
 * destroyed by `stop()`.
 */
export async function startFaultProxy(
  target: { host: string; port: number },
  initialPlan: (req: ProxiedRequest) => Fault = () => ({ kind: 'pass' }),
): Promise<FaultProxy> {
  let plan = initialPlan;
  let index = 0;
  const log: FaultProxy['log'] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const track = (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => undefined); // resets are the point here
  };

  const server: Server = createServer((client) => {
    track(client);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf(HEAD_END);
      if (end < 0) {
        if (head.length > 64 * 1024) client.destroy();
        return;
      }
      client.off('data', onData);
      client.pause();
      const headText = head.subarray(0, end).toString('latin1');
      const rest = head.subarray(end + 4);
      const [method = 'GET', path = '/'] = headText.split('\r\n')[0]!.split(' ');
      const req: ProxiedRequest = { index: index++, method, path };
      const fault = plan(req);
      log.push({ ...req, fault: fault.kind });
      if (fault.kind === 'status') {
        const text = fault.body ?? `injected ${fault.status}`;
        const type = fault.body === undefined ? 'text/plain' : 'application/json';
        const body = method === 'HEAD' ? '' : text;
        client.end(
          `HTTP/1.1 ${fault.status} Injected\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${body}`,
        );
        return;
      }
      if (fault.kind === 'blackhole') {
        client.resume(); // swallow the body, answer nothing
        return;
      }
      if (fault.kind === 'close') {
        if (fault.reset) client.resetAndDestroy();
        else client.end();
        return;
      }
      const lines = headText.split('\r\n').filter((l) => !/^connection\s*:/i.test(l));
      const rewritten = Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\nConnection: close\r\n\r\n`, 'latin1'), rest]);
      const upstream = connect(target.port, target.host);
      track(upstream);
      upstream.once('connect', () => {
        upstream.write(rewritten);
        client.pipe(upstream);
        client.resume();
        relay(upstream, client, fault, timers);
      });
      upstream.once('error', () => client.destroy());
      client.once('close', () => upstream.destroy());
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  let paused = false;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    log,
    setPlan: (p) => {
      plan = p;
    },
    pause: () => {
      if (paused) return;
      paused = true;
      server.close();
    },
    resume: async () => {
      if (!paused) return;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      });
      paused = false;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearInterval(t);
        for (const s of sockets) s.destroy();
        if (paused) resolve();
        else server.close(() => resolve());
      }),
  };
}

/** Upstream → client, with the fault applied. */
function relay(upstream: Socket, client: Socket, fault: Fault, timers: Set<NodeJS.Timeout>): void {
  switch (fault.kind) {
    case 'pass':
      upstream.pipe(client);
      return;
    case 'delay': {
      // Nothing reads the upstream socket until the timer fires, so the response waits in it.
      const timer = setTimeout(() => {
        timers.delete(timer);
        upstream.pipe(client);
      }, fault.ms);
      timers.add(timer);
      client.once('close', () => {
        clearTimeout(timer);
        timers.delete(timer);
      });
      return;
    }
    case 'reset':
    case 'stall': {
      let sent = 0;
      upstream.on('data', (chunk: Buffer) => {
        if (sent >= fault.afterBytes) return;
        const part = chunk.subarray(0, fault.afterBytes - sent);
        sent += part.length;
        client.write(part);
        if (sent >= fault.afterBytes) {
          if (fault.kind === 'reset') {
            upstream.destroy();
            const reset = () => {
              // Let the bytes already written leave before the RST.
              if (client.writableLength === 0) client.resetAndDestroy();
              else client.once('drain', () => client.resetAndDestroy());
            };
            if (fault.until) void fault.until().finally(reset);
            else reset();
          } else {
            upstream.pause(); // stall: hold the connection open, send nothing more
          }
        }
      });
      // A response shorter than the limit passes whole.
      upstream.once('end', () => {
        if (sent < fault.afterBytes) client.end();
      });
      return;
    }
    case 'drip': {
      const queue: Buffer[] = [];
      let queued = 0;
      let ended = false;
      const perTick = Math.max(1, Math.floor((fault.bytesPerSecond * TICK_MS) / 1000));
      upstream.on('data', (chunk: Buffer) => {
        queue.push(chunk);
        queued += chunk.length;
        if (queued > 256 * 1024) upstream.pause();
      });
      upstream.once('end', () => (ended = true));
      const timer = setInterval(() => {
        let budget = perTick;
        while (budget > 0 && queue.length > 0) {
          const head = queue[0]!;
          const part = head.subarray(0, budget);
          client.write(part);
          budget -= part.length;
          queued -= part.length;
          if (part.length === head.length) queue.shift();
          else queue[0] = head.subarray(part.length);
        }
        if (queued < 64 * 1024) upstream.resume();
        if (ended && queue.length === 0) {
          clearInterval(timer);
          timers.delete(timer);
          client.end();
        }
      }, TICK_MS);
      timers.add(timer);
      client.once('close', () => {
        clearInterval(timer);
        timers.delete(timer);
      });
      return;
    }
    case 'truncate':
    case 'corrupt': {
      let head = Buffer.alloc(0);
      let bodySeen = -1; // -1 until the response head has passed
      upstream.on('data', (chunk: Buffer) => {
        let data = chunk;
        if (bodySeen < 0) {
          head = Buffer.concat([head, chunk]);
          const end = head.indexOf(HEAD_END);
          if (end < 0) return;
          let headText = head.subarray(0, end).toString('latin1');
          if (fault.kind === 'truncate')
            headText = headText
              .split('\r\n')
              .filter((l) => !/^content-length\s*:/i.test(l))
              .join('\r\n');
          client.write(Buffer.from(`${headText}\r\n\r\n`, 'latin1'));
          data = head.subarray(end + 4);
          bodySeen = 0;
        }
        if (fault.kind === 'truncate') {
          const part = data.subarray(0, Math.max(0, fault.afterBodyBytes - bodySeen));
          bodySeen += part.length;
          client.write(part);
          if (bodySeen >= fault.afterBodyBytes) {
            upstream.destroy();
            client.end();
          }
          return;
        }
        const at = fault.atBodyByte - bodySeen;
        if (at >= 0 && at < data.length) {
          data = Buffer.from(data);
          data[at] = data[at]! ^ 0x01;
        }
        bodySeen += data.length;
        client.write(data);
      });
      upstream.once('end', () => client.end());
      return;
    }
    default:
      upstream.pipe(client);
  }
}

/** A plan: `fault` for every GET, pass for everything else. */
export const onGet =
  (fault: Fault) =>
  (req: ProxiedRequest): Fault =>
    req.method === 'GET' ? fault : { kind: 'pass' };

/** A plan: `fault` for the first GET only, pass for everything else. */
export const firstGet = (fault: Fault) => {
  let used = false;
  return (req: ProxiedRequest): Fault => {
    if (req.method !== 'GET' || used) return { kind: 'pass' };
    used = true;
    return fault;
  };
};
