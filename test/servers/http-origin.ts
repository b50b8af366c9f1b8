import { createHash } from 'node:crypto';
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { Readable, pipeline } from 'node:stream';
import type { TlsMaterial } from './tls';

/** One request as the origin received it. */
export interface RecordedRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  headers: IncomingHttpHeaders;
}

export interface HttpOrigin {
  /** `http(s)://127.0.0.1:<port>`. */
  url: string;
  /** The same server as `http(s)://localhost:<port>`: another origin, for cross-origin redirects. */
  altUrl: string;
  port: number;
  requests: RecordedRequest[];
  /** Replaces a file's bytes (and so its ETag) from the next request on: an object overwritten in place. */
  replace(path: string, content: Buffer): void;
  /** The next `count` GETs with a Range that does not start at 0 send half their bytes, then reset. */
  breakNextRanges(count: number): void;
  /** GETs with a Range starting at or after `offset` send 1 KiB, then stall (undefined: none). */
  stallRangesFrom(offset: number | undefined): void;
  /**
   * Ranged GETs are answered after `latencyMs` and sent at `bytesPerSec` each (a link with a
   * per-connection cap); undefined: at once, as fast as the socket takes them.
   */
  paceRanges(pace: RangePace | undefined): void;
  /** The most ranged GETs that were open at once (received, response not finished) since the last call. */
  takeMaxRangesOpen(): number;
  stop(): Promise<void>;
}

export interface RangePace {
  latencyMs: number;
  bytesPerSec: number;
}

export interface HttpOriginOptions {
  /** HTTPS with this key and certificate; plain HTTP when absent. */
  tls?: TlsMaterial;
  /** Files by path (`/app.jar`), each also served under `/auth/...` and `/nohead/...`. */
  files: Record<string, Buffer>;
  /** Token `/auth/...` requires as `Authorization: Bearer <token>`; without it `/auth/` always answers 401. */
  bearerToken?: string;
  /** Sees each request as it arrives, before it is answered (to change a file at a chosen moment). */
  onRequest?: (req: RecordedRequest) => void;
}

const CHUNK = 64 * 1024;
const LAST_MODIFIED = new Date('2024-05-01T12:00:00Z').toUTCString();

/**
 * A real node:http(s) origin on 127.0.0.1, port 0, as realistic as the HTTP plugin's tests need:
 * - `/<file>`: `content-length`, `ETag`, `Last-Modified`, `Range` (206, or 416 when unsatisfiable);
 * - `/auth/<file>`: 401 unless `Authorization: Bearer <bearerToken>`;
 * - `/nohead/<file>`: HEAD answers 405 (as some object stores' signed URLs do), GET serves the file;
 * - `/redirect/<n>/<rest>`: exactly n redirects (relative `Location`) ending at `/<rest>`;
 *   `?code=307` picks the status (default 302);
 * - `/to?url=<absolute URL>`: one redirect to that URL (cross-origin tests);
 * - `/weak/<file>`: the file with a weak ETag (`W/"…"`), which must not pin ranges;
 * - `If-Match` with another ETag: 412 (RFC 9110 §13.1.1);
 * - `/stall`: headers and 1 KiB of a 1 MiB body, then silence; `/stall-headers`: no answer at all.
 * Every request's method, path and headers are recorded in `requests`.
 */
export async function startHttpOrigin(opts: HttpOriginOptions): Promise<HttpOrigin> {
  const requests: RecordedRequest[] = [];
  const files = { ...opts.files };
  const etags = new Map<string, string>();
  const setFile = (path: string, content: Buffer) => {
    files[path] = content;
    etags.set(path, `"${createHash('sha1').update(content).digest('hex')}"`);
  };
  for (const [path, content] of Object.entries(opts.files)) setFile(path, content);
  const faults: RangeFaults = { breaks: 0, open: 0, maxOpen: 0 };

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://origin');
    const recorded = { method: req.method ?? 'GET', path: url.pathname, headers: req.headers };
    requests.push(recorded);
    opts.onRequest?.(recorded);
    const path = url.pathname;
    const code = Number(url.searchParams.get('code') ?? '302');

    if (path === '/to') {
      res.writeHead(code, { location: url.searchParams.get('url') ?? '/' }).end();
      return;
    }
    const redirect = /^\/redirect\/(\d+)(\/.*)$/.exec(path);
    if (redirect) {
      const n = Number(redirect[1]);
      const rest = redirect[2]!;
      res.writeHead(code, { location: (n > 1 ? `/redirect/${n - 1}${rest}` : rest) + url.search }).end();
      return;
    }
    if (path === '/stall') {
      res.writeHead(200, { 'content-length': String(1024 * 1024), 'content-type': 'application/octet-stream' });
      res.write(Buffer.alloc(1024));
      return; // never ends: the client's read timeout must fire
    }
    if (path === '/stall-headers') return; // never answers

    let filePath = path;
    if (path.startsWith('/auth/')) {
      filePath = path.slice('/auth'.length);
      if (opts.bearerToken === undefined || req.headers.authorization !== `Bearer ${opts.bearerToken}`) {
        res.writeHead(401, { 'www-authenticate': 'Bearer', 'content-type': 'text/plain' }).end('unauthorized');
        return;
      }
    } else if (path.startsWith('/weak/')) {
      filePath = path.slice('/weak'.length);
    } else if (path.startsWith('/nohead/')) {
      filePath = path.slice('/nohead'.length);
      if (req.method === 'HEAD') {
        res.writeHead(405, { allow: 'GET' }).end();
        return;
      }
    }
    const content = files[filePath];
    if (content === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    const etag = etags.get(filePath)!;
    serveFile(req, res, content, path.startsWith('/weak/') ? `W/${etag}` : etag, faults);
  };

  const server: Server = opts.tls ? createHttpsServer({ key: opts.tls.key, cert: opts.tls.cert }, handler) : createHttpServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  const scheme = opts.tls ? 'https' : 'http';
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    altUrl: `${scheme}://localhost:${port}`,
    port,
    requests,
    replace: setFile,
    breakNextRanges: (count) => {
      faults.breaks = count;
    },
    stallRangesFrom: (offset) => {
      faults.stallFrom = offset;
    },
    paceRanges: (pace) => {
      faults.pace = pace;
    },
    takeMaxRangesOpen: () => {
      const max = faults.maxOpen;
      faults.maxOpen = faults.open;
      return max;
    },
    stop: () => closeServer(server),
  };
}

interface RangeFaults {
  breaks: number;
  /** Undefined: no stall, no pacing (the setters clear them with undefined). */
  stallFrom?: number | undefined;
  pace?: RangePace | undefined;
  /** Ranged GETs open now, and the most at once. */
  open: number;
  maxOpen: number;
}

function serveFile(req: IncomingMessage, res: ServerResponse, content: Buffer, etag: string, faults: RangeFaults): void {
  const size = content.length;
  const headers: Record<string, string> = {
    'content-type': 'application/java-archive',
    'accept-ranges': 'bytes',
    etag,
    'last-modified': LAST_MODIFIED,
  };
  const ifMatch = req.headers['if-match'];
  if (ifMatch !== undefined && ifMatch.trim() !== '*' && !ifMatch.split(',').some((t) => t.trim() === etag && !etag.startsWith('W/'))) {
    res.writeHead(412, { etag }).end();
    return;
  }
  let start = 0;
  let end = size - 1;
  let status = 200;
  const range = req.headers.range;
  if (range !== undefined) {
    const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
    const parsed = m ? parseRange(m[1]!, m[2]!, size) : undefined;
    if (!parsed) {
      res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
      return;
    }
    [start, end] = parsed;
    status = 206;
    headers['content-range'] = `bytes ${start}-${end}/${size}`;
  }
  headers['content-length'] = String(end - start + 1);
  if (status === 206 && req.method === 'GET') {
    faults.open++;
    faults.maxOpen = Math.max(faults.maxOpen, faults.open);
    res.once('close', () => faults.open--);
    const pace = faults.pace;
    if (pace) {
      setTimeout(() => sendPaced(res, status, headers, content.subarray(start, end + 1), pace.bytesPerSec), pace.latencyMs);
      return;
    }
  }
  res.writeHead(status, headers);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  if (status === 206 && req.method === 'GET' && faults.stallFrom !== undefined && start >= faults.stallFrom) {
    res.write(content.subarray(start, Math.min(start + 1024, end + 1)));
    return; // never ends
  }
  if (status === 206 && req.method === 'GET' && start > 0 && faults.breaks > 0) {
    faults.breaks--;
    res.write(content.subarray(start, start + Math.floor((end - start + 1) / 2)), () => res.destroy());
    return;
  }
  // Stream in 64 KiB slices with back-pressure; slices share the buffer, nothing is copied.
  const slices = function* () {
    for (let off = start; off <= end; off += CHUNK) yield content.subarray(off, Math.min(off + CHUNK, end + 1));
  };
  pipeline(Readable.from(slices(), { objectMode: false }), res, () => {
    /* a client that goes away mid-body is expected in abort tests */
  });
}

/** One 64 KiB slice per `CHUNK / bytesPerSec`, until the body is sent or the client is gone. */
function sendPaced(res: ServerResponse, status: number, headers: Record<string, string>, body: Buffer, bytesPerSec: number): void {
  if (res.destroyed) return;
  res.writeHead(status, headers);
  let off = 0;
  const tick = () => {
    if (res.destroyed) return;
    const slice = body.subarray(off, off + CHUNK);
    off += slice.length;
    if (off >= body.length) {
      res.end(slice);
      return;
    }
    res.write(slice);
    setTimeout(tick, (CHUNK / bytesPerSec) * 1000);
  };
  tick();
}

function parseRange(from: string, to: string, size: number): [number, number] | undefined {
  if (from === '' && to === '') return undefined;
  if (from === '') {
    const n = Math.min(Number(to), size);
    return n > 0 ? [size - n, size - 1] : undefined;
  }
  const start = Number(from);
  const end = to === '' ? size - 1 : Math.min(Number(to), size - 1);
  return start < size && start <= end ? [start, end] : undefined;
}

function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

export interface ForwardProxy {
  /** `http://127.0.0.1:<port>`, for HTTPS_PROXY / HTTP_PROXY. */
  url: string;
  /** `CONNECT` targets (`host:port`) and absolute-form request targets, in arrival order. */
  seen: string[];
  stop(): Promise<void>;
}

/**
 * A minimal HTTP proxy: `CONNECT host:port` tunnels (for https:// targets) and absolute-form
 * forwarding (for http:// targets). Its only policy is `refuse` (403 to a CONNECT). It records what
 * it was asked for.
 */
export async function startForwardProxy(opts: { refuse?: (target: string) => boolean } = {}): Promise<ForwardProxy> {
  const seen: string[] = [];
  const sockets = new Set<Socket>();
  const server = createHttpServer((req, res) => {
    seen.push(req.url ?? '');
    const target = new URL(req.url ?? '');
    const headers = { ...req.headers };
    delete headers['proxy-connection'];
    const upstream = httpRequest(
      { host: target.hostname, port: target.port, path: target.pathname + target.search, method: req.method, headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    seen.push(req.url ?? '');
    if (opts.refuse?.(req.url ?? '')) {
      client.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
      return;
    }
    const [host, port] = (req.url ?? '').split(':');
    const upstream = netConnect(Number(port), host!, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream).add(client);
    const done = () => {
      upstream.destroy();
      client.destroy();
    };
    upstream.on('error', done).on('close', done);
    client.on('error', done).on('close', done);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await closeServer(server);
    },
  };
}
