import { connect as netConnect, isIP, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';
import { type ConnectGuard, guardedConnection } from '../net/connect-guard';
import { trustedCa } from '../net/guarded-connector';
import { slabPool } from './slab-pool';

/** Bytes per read buffer: one body chunk handed on, one positional write of the file. */
const SLAB_BYTES = slabPool.bytes;
/** A slab with less room than this is handed on and a fresh one read into (a socket read is usually at most 64 KiB). */
const MIN_READ_BYTES = 64 * 1024;
/** A partly filled slab is handed on after this long, so that a slow origin still shows progress. */
const PUSH_AFTER_MS = 100;
/** The response head (status line and header fields) may not be larger. */
const MAX_HEAD_BYTES = 64 * 1024;
/** A chunk-size line or one trailer field may not be longer; all trailer fields together, 16 KiB. */
const MAX_LINE_BYTES = 4096;
const MAX_TRAILER_BYTES = 16 * 1024;
/** Idle keep-alive connections per origin, and how long one is kept (servers close theirs after 5 s). */
const MAX_IDLE_PER_ORIGIN = 16;
const IDLE_MS = 4000;

export type BulkErrorCode = 'ERR_BULK_CONNECT_TIMEOUT' | 'ERR_BULK_READ_TIMEOUT' | 'ERR_BULK_PROTOCOL' | 'ERR_BULK_CLOSED';

/**
 * A failure of the bulk client itself. Its message is the client's own, naming neither the request
 * path nor a header, so a plugin may show it.
 */
export class BulkHttpError extends Error {
  override readonly name = 'BulkHttpError';
  constructor(
    readonly code: BulkErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface BulkHttpOptions {
  /** The restricted-host guard, applied to every connection with its own port. */
  guard: ConnectGuard;
  /** `gateway.artifacts.ca-bundle` (PEM), trusted in addition to Node's store. */
  ca?: string | undefined;
  connectTimeoutMs: number;
  /** Longest wait for the next bytes of a response (head or body). */
  readTimeoutMs: number;
}

export interface BulkRequest {
  /** `http:` or `https:` origin; the connection goes to its host and port. */
  origin: URL;
  /** Path and query, sent exactly as given (already encoded; a signer may have signed this exact text). */
  path: string;
  method: 'GET' | 'HEAD';
  /** Header fields; `host` is added from `origin` unless present. */
  headers: Readonly<Record<string, string>>;
  signal: AbortSignal;
}

export interface BulkResponse {
  statusCode: number;
  /** Lower-case names; a field sent more than once is an array, as undici and node:http give them. */
  headers: Record<string, string | string[]>;
  /**
   * The body, in chunks of up to 1 MiB that were read into directly (no copy). Destroying it closes
   * the connection; reading it to the end returns a keep-alive connection to the pool.
   */
  body: Readable;
}

/**
 * An HTTP/1.1 client for one job: reading large object bodies with little CPU per byte. Node's
 * own clients (undici, node:http) read a socket into a fresh 64 KiB buffer per read and hand each
 * one through a parser and a stream, which costs several times a native client's CPU per byte
 * before the digest (ADR 0035). This client reads the socket with `onread` straight into
 * 1 MiB buffers, finds the framing itself (Content-Length, chunked, or close), and hands each
 * buffer on as one chunk (ADR 0035).
 *
 * Deliberately small and strict: GET and HEAD without a request body, HTTP/1.1 over TCP or TLS
 * (ALPN `http/1.1`), keep-alive per origin; a response that is not plainly well-formed (a bad
 * status line or field, obs-fold, a repeated Content-Length or both framings, an unknown transfer
 * coding, a malformed chunk line or trailer field) fails with `ERR_BULK_PROTOCOL` rather than
 * being guessed at; what llhttp refuses, it refuses too (test/unit/download/bulk-http-fuzz.test.ts).
 * Proxies, redirects and retries are the caller's (a plugin); a keep-alive connection the server
 * closed before answering is retried once on a new one, as every client does.
 */
export class BulkHttpClient {
  private readonly idle = new Map<string, Connection[]>();
  private readonly ca: string[] | undefined;
  private closed = false;

  constructor(private readonly opts: BulkHttpOptions) {
    this.ca = trustedCa(opts.ca);
  }

  async request(req: BulkRequest): Promise<BulkResponse> {
    req.signal.throwIfAborted();
    if (this.closed) throw new BulkHttpError('ERR_BULK_CLOSED', 'the client is closed');
    const head = requestHead(req);
    const pooled = this.takeIdle(keyOf(req.origin));
    if (pooled !== undefined) {
      try {
        return await new Exchange(pooled, req, head, this.opts.readTimeoutMs, (c) => this.release(c)).response;
      } catch (err) {
        // A server may close an idle connection just as it is reused: once more on a fresh one.
        if (!(err instanceof StaleConnection)) throw err;
      }
    }
    const conn = await this.connect(req.origin, req.signal);
    const response = new Exchange(conn, req, head, this.opts.readTimeoutMs, (c) => this.release(c)).response;
    return response.catch((err: unknown) => {
      throw err instanceof StaleConnection ? err.cause : err;
    });
  }

  /** Closes idle connections; responses in progress finish, their connections are then closed. */
  async close(): Promise<void> {
    this.closed = true;
    for (const list of this.idle.values()) for (const c of list) c.socket.destroy();
    this.idle.clear();
  }

  private takeIdle(key: string): Connection | undefined {
    const list = this.idle.get(key);
    while (list !== undefined && list.length > 0) {
      const c = list.pop()!;
      c.stopIdle();
      if (!c.socket.destroyed) return c;
    }
    return undefined;
  }

  private release(c: Connection): void {
    if (this.closed || c.socket.destroyed) {
      c.socket.destroy();
      return;
    }
    c.reused = true;
    let list = this.idle.get(c.key);
    if (list === undefined) {
      list = [];
      this.idle.set(c.key, list);
    }
    if (list.length >= MAX_IDLE_PER_ORIGIN) {
      c.socket.destroy();
      return;
    }
    list.push(c);
    c.startIdle(IDLE_MS, () => {
      const at = list.indexOf(c);
      if (at >= 0) list.splice(at, 1);
    });
  }

  private connect(origin: URL, signal: AbortSignal): Promise<Connection> {
    const tls = origin.protocol === 'https:';
    if (!tls && origin.protocol !== 'http:') throw new BulkHttpError('ERR_BULK_PROTOCOL', `unsupported protocol ${origin.protocol}`);
    const { port, lookup } = guardedConnection(this.opts.guard, origin);
    const host = origin.hostname.replace(/^\[|\]$/g, '');
    const conn = new Connection(keyOf(origin));
    const onread = { buffer: () => conn.buffer(), callback: (n: number, buf: Uint8Array) => conn.onRead(n, buf) };
    // tls.connect honours `onread` as net.connect does (the decrypted bytes), though @types/node omits it.
    const tlsOptions: ConnectionOptions & { onread: typeof onread } = {
      host,
      port,
      lookup,
      onread,
      ALPNProtocols: ['http/1.1'],
      ...(isIP(host) === 0 ? { servername: host } : {}),
      ...(this.ca ? { ca: this.ca } : {}),
    };
    const socket = tls ? tlsConnect(tlsOptions) : netConnect({ host, port, lookup, onread });
    conn.attach(socket);
    return new Promise<Connection>((resolve, reject) => {
      const timer = setTimeout(
        () => fail(new BulkHttpError('ERR_BULK_CONNECT_TIMEOUT', `no connection within ${this.opts.connectTimeoutMs} ms`)),
        this.opts.connectTimeoutMs,
      );
      const onAbort = () => fail(signal.reason);
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        socket.off('error', fail);
      };
      function fail(err: unknown) {
        done();
        socket.destroy();
        reject(err);
      }
      signal.addEventListener('abort', onAbort, { once: true });
      socket.once('error', fail);
      socket.once(tls ? 'secureConnect' : 'connect', () => {
        done();
        resolve(conn);
      });
    });
  }
}

/** Reads and drops a body that is not used (an error page, a redirect), up to `limit` bytes; beyond, the connection is closed. */
export async function discardBody(body: Readable, limit = 64 * 1024): Promise<void> {
  let n = 0;
  try {
    for await (const chunk of body) {
      n += (chunk as Buffer).length;
      if (n > limit) break; // leaving the loop destroys the body
    }
  } catch {
    // The connection is closed instead; nothing to report.
  }
}

/** Thrown when a reused connection ended or failed before the first byte of its response. */
class StaleConnection extends Error {
  constructor(override readonly cause: unknown) {
    super('stale keep-alive connection');
  }
}

function keyOf(origin: URL): string {
  return `${origin.protocol}//${origin.host}`;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/**
 * A chunk-size line (RFC 9112 §7.1) without the optional white space, as llhttp reads it: hex digits
 * (leading zeros of any number, at most 12 significant: 256 TiB), then extensions `;name[=value]`,
 * the value a token (or empty) or a quoted string. Extensions are read past, never used.
 */
const CHUNK_LINE =
  /^0*([0-9A-Fa-f]{1,12})(?:;[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?:=(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]*|"(?:[\t\x20\x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t\x20-\x7e\x80-\xff])*"))?)*$/;

function requestHead(req: BulkRequest): string {
  if (!/^\/[\x21-\x7e]*$/.test(req.path))
    throw new BulkHttpError('ERR_BULK_PROTOCOL', 'the request path must start with / and be encoded (no spaces or control characters)');
  let head = `${req.method} ${req.path} HTTP/1.1\r\n`;
  let host = false;
  for (const [name, value] of Object.entries(req.headers)) {
    // A header from configuration or a signer with CR or LF in it would split the request.
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value))
      throw new BulkHttpError('ERR_BULK_PROTOCOL', `the request header ${TOKEN.test(name) ? name : '(a name)'} is not a valid field`);
    if (name.toLowerCase() === 'host') host = true;
    head += `${name}: ${value}\r\n`;
  }
  if (!host) head += `host: ${req.origin.host}\r\n`;
  return `${head}\r\n`;
}

/**
 * A header or trailer field line: name and value (without surrounding white space), or undefined
 * when malformed — obs-fold (a line starting with white space), a bare CR, a control character, an
 * empty name or one with spaces.
 */
function parseField(line: string): [string, string] | undefined {
  const colon = line.indexOf(':');
  const name = colon > 0 ? line.slice(0, colon) : '';
  const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
  return TOKEN.test(name) && FIELD_VALUE.test(value) ? [name, value] : undefined;
}

/** One socket and whatever exchange is using it; idle between exchanges. */
class Connection {
  socket!: Socket;
  exchange: Exchange | undefined;
  /** Served an exchange before: a failure before the first response byte may be a stale keep-alive. */
  reused = false;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Where a read goes while no exchange has the connection (and the first read of the next one). */
  private readonly spare = Buffer.allocUnsafe(1024);

  constructor(readonly key: string) {}

  attach(socket: Socket): void {
    this.socket = socket;
    socket.on('error', (err) => this.exchange?.socketError(err));
    socket.on('end', () => this.exchange?.socketEnd());
    socket.on('close', () => {
      this.stopIdle();
      this.exchange?.socketError(new BulkHttpError('ERR_BULK_CLOSED', 'the connection closed'));
    });
    socket.on('timeout', () => this.exchange?.timedOut());
  }

  buffer(): Uint8Array {
    return this.exchange?.buffer() ?? this.spare;
  }

  /** onread's callback: false pauses the socket. */
  onRead(n: number, buf: Uint8Array): boolean {
    const exchange = this.exchange;
    if (exchange === undefined) {
      // Bytes nobody asked for on an idle connection: it cannot be reused.
      this.socket.destroy();
      return false;
    }
    try {
      const more = exchange.onRead(n, buf);
      // The exchange ended in this read and gave the connection back to the pool: it reads on, so that
      // stray bytes or a close while idle are seen (false would stop the socket until the next request).
      return more || (this.exchange === undefined && !this.socket.destroyed);
    } catch (err) {
      // Thrown out of a socket callback, an exception is uncaught (the process exits); a fault here,
      // whatever the bytes were, fails this exchange as a response that could not be read.
      exchange.internalFault(err);
      this.socket.destroy();
      return false;
    }
  }

  startIdle(ms: number, onExpire: () => void): void {
    this.socket.setTimeout(0);
    this.idleTimer = setTimeout(() => {
      onExpire();
      this.socket.destroy();
    }, ms);
    this.idleTimer.unref();
    this.socket.unref();
    this.onIdleClose = onExpire;
  }

  stopIdle(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.onIdleClose?.();
    this.onIdleClose = undefined;
    if (!this.socket.destroyed) this.socket.ref();
  }

  private onIdleClose: (() => void) | undefined;
}

type Framing = { kind: 'none' } | { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };

enum Chunked {
  Size,
  Data,
  DataEnd,
  Trailer,
}

/** One request and its response on one connection. */
class Exchange {
  readonly response: Promise<BulkResponse>;
  private resolve!: (r: BulkResponse) => void;
  private reject!: (err: unknown) => void;
  private state: 'head' | 'body' | 'done' = 'head';
  /** The response promise was resolved: from then on a failure is the body's, not the request's. */
  private handedOut = false;
  private failed = false;
  private slab = slabPool.take();
  /** Bytes of the slab in use: the head so far, or the decoded body. */
  private fill = 0;
  /** Body bytes of the slab already handed on. */
  private pushed = 0;
  private lastPush = 0;
  private pushTimer: NodeJS.Timeout | undefined;
  private received = 0;
  private framing: Framing = { kind: 'none' };
  private reusable = false;
  private body: BulkBody | undefined;
  private paused = false;
  private bodyBytes = 0;
  // Chunked decoding.
  private cstate = Chunked.Size;
  private chunkLeft = 0;
  private line = '';
  private trailerBytes = 0;
  private readonly onAbort: () => void;

  constructor(
    private readonly conn: Connection,
    private readonly req: BulkRequest,
    head: string,
    private readonly readTimeoutMs: number,
    private readonly release: (c: Connection) => void,
  ) {
    this.response = new Promise<BulkResponse>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    conn.exchange = this;
    if (req.signal.aborted) {
      this.state = 'done';
      conn.exchange = undefined;
      conn.socket.destroy();
      this.reject(req.signal.reason);
      this.onAbort = () => undefined;
      return;
    }
    this.onAbort = () => this.fail(req.signal.reason, true);
    req.signal.addEventListener('abort', this.onAbort, { once: true });
    conn.socket.setTimeout(readTimeoutMs);
    conn.socket.write(head, 'latin1');
    // A socket paused by an earlier exchange's backpressure reads again.
    conn.socket.resume();
  }

  buffer(): Uint8Array {
    return this.slab.subarray(this.fill);
  }

  onRead(n: number, buf: Uint8Array): boolean {
    // The buffer of a read is chosen when the read before it ends: the first read of an exchange
    // on a kept-alive connection went into the connection's spare buffer.
    if (buf.buffer !== this.slab.buffer || buf.byteOffset !== this.slab.byteOffset + this.fill)
      this.slab.set(buf.subarray(0, n), this.fill);
    this.received += n;
    if (this.state === 'head') return this.onHeadBytes(n);
    if (this.state === 'body') {
      this.onBodyBytes(this.fill, n);
      return this.afterBodyBytes();
    }
    this.conn.socket.destroy(); // bytes after the response: the connection is not reusable
    return false;
  }

  private onHeadBytes(n: number): boolean {
    let from = Math.max(0, this.fill - 3);
    this.fill += n;
    for (;;) {
      const end = this.slab.subarray(0, this.fill).indexOf('\r\n\r\n', from, 'latin1');
      if (end < 0) {
        if (this.fill >= MAX_HEAD_BYTES) this.protocol(`the response head is over ${MAX_HEAD_BYTES} bytes`);
        return this.state !== 'done';
      }
      if (end + 4 > MAX_HEAD_BYTES) {
        // The whole head may arrive in one read of up to a slab.
        this.protocol(`the response head is over ${MAX_HEAD_BYTES} bytes`);
        return false;
      }
      const parsed = this.parseHead(this.slab.toString('latin1', 0, end));
      if (parsed === undefined) return false;
      // What followed the head is the first body bytes (or the next head, after a 1xx).
      const rest = this.fill - (end + 4);
      this.slab.copyWithin(0, end + 4, this.fill);
      this.fill = 0;
      if (parsed.statusCode >= 100 && parsed.statusCode < 200) {
        if (parsed.statusCode === 101) {
          this.protocol('101 Switching Protocols to a request that asked for none');
          return false;
        }
        this.fill = rest;
        from = 0;
        continue;
      }
      const response = this.startBody(parsed, rest);
      if (response === undefined) return false;
      if (this.state === 'body' && rest > 0) this.onBodyBytes(0, rest);
      // The response is handed out only now: body bytes that came in the same read as the head and
      // fail (a malformed chunk line, say) reject the request instead. Failed before its caller had
      // the body, the body's error would reach no error translation the caller adds to it.
      if (this.failed) return false; // the request was rejected
      this.handedOut = true;
      this.resolve(response);
      return this.afterBodyBytes();
    }
  }

  private parseHead(text: string): { statusCode: number; minor: number; headers: Record<string, string | string[]> } | undefined {
    const lines = text.split('\r\n');
    const status = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [\t\x20-\x7e\x80-\xff]*)?$/.exec(lines[0]!);
    if (!status) return void this.protocol('a malformed status line');
    const headers: Record<string, string | string[]> = {};
    for (let i = 1; i < lines.length; i++) {
      const field = parseField(lines[i]!);
      if (field === undefined) return void this.protocol('a malformed header field');
      const [name, value] = field;
      const key = name.toLowerCase();
      const had = headers[key];
      headers[key] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
    }
    return { statusCode: Number(status[2]), minor: Number(status[1]), headers };
  }

  /** Decides the framing and makes the body; undefined (the request rejected) when the framing is bad. */
  private startBody(
    head: { statusCode: number; minor: number; headers: Record<string, string | string[]> },
    rest: number,
  ): BulkResponse | undefined {
    const { statusCode, headers } = head;
    const connection = String(headers.connection ?? '').toLowerCase();
    this.reusable = head.minor === 1 && !/(^|,)\s*close\s*($|,)/.test(connection);
    const te = headers['transfer-encoding'];
    const cl = headers['content-length'];
    // Two framings, or one length said twice: a sign of response splitting (RFC 9112 §6.3), refused
    // whatever the status, as llhttp (undici, node:http) refuses it, so that an origin gets the same
    // answer with and without a proxy (proxied requests go through undici).
    if (te !== undefined && cl !== undefined) {
      this.protocol('both transfer-encoding and content-length');
      return undefined;
    }
    if (Array.isArray(cl) || (cl !== undefined && !/^0*\d{1,15}$/.test(cl))) {
      this.protocol('an invalid or repeated content-length');
      return undefined;
    }
    if (this.req.method === 'HEAD' || statusCode === 204 || statusCode === 304) {
      this.framing = { kind: 'none' };
    } else if (te !== undefined) {
      const codings = (Array.isArray(te) ? te.join(',') : te).split(',').map((c) => c.trim().toLowerCase());
      if (codings.length !== 1 || codings[0] !== 'chunked') {
        this.protocol(`transfer-encoding '${codings.join(', ').slice(0, 64)}' (only chunked is read)`);
        return undefined;
      }
      this.framing = { kind: 'chunked' };
    } else if (cl !== undefined) {
      this.framing = { kind: 'length', left: Number(cl) };
    } else {
      this.framing = { kind: 'close' };
      this.reusable = false;
    }
    this.state = 'body';
    this.lastPush = Date.now();
    this.body = new BulkBody(this);
    if (this.framing.kind === 'none' || (this.framing.kind === 'length' && this.framing.left === 0)) {
      if (rest > 0) this.reusable = false; // bytes after a response without a body
      this.complete();
    }
    return { statusCode, headers, body: this.body };
  }

  /** Decodes `n` raw bytes at `at` (≥ fill) into the slab's body bytes, which end at `fill`. */
  private onBodyBytes(at: number, n: number): void {
    const f = this.framing;
    if (f.kind === 'close') {
      this.fill += n;
    } else if (f.kind === 'length') {
      const k = Math.min(n, f.left);
      this.fill += k;
      f.left -= k;
      if (k < n) this.reusable = false; // bytes beyond the body: dropped, and so is the connection
      if (f.left === 0) this.complete();
    } else if (f.kind === 'chunked') {
      this.decodeChunked(at, at + n);
    }
  }

  private decodeChunked(from: number, to: number): void {
    let p = from;
    while (p < to && this.state === 'body') {
      if (this.cstate === Chunked.Data) {
        const k = Math.min(this.chunkLeft, to - p);
        if (p !== this.fill) this.slab.copyWithin(this.fill, p, p + k);
        this.fill += k;
        p += k;
        this.chunkLeft -= k;
        if (this.chunkLeft === 0) this.cstate = Chunked.DataEnd;
        continue;
      }
      const lf = this.slab.subarray(p, to).indexOf(10);
      const stop = lf < 0 ? to : p + lf;
      this.line += this.slab.toString('latin1', p, stop);
      if (this.line.length > MAX_LINE_BYTES) {
        this.protocol('a chunk-size line or trailer field over 4096 bytes');
        return;
      }
      p = stop;
      if (lf < 0) break;
      p++; // the LF
      if (!this.line.endsWith('\r')) {
        this.protocol('a chunked-body line not ended by CRLF');
        return;
      }
      const line = this.line.slice(0, -1);
      this.line = '';
      if (this.cstate === Chunked.Trailer && line === '' && p < to) this.reusable = false; // bytes beyond the body, as for Content-Length
      this.chunkLine(line);
    }
  }

  private chunkLine(line: string): void {
    switch (this.cstate) {
      case Chunked.Size: {
        const m = CHUNK_LINE.exec(line);
        if (!m) {
          this.protocol('a malformed chunk size');
          return;
        }
        this.chunkLeft = Number.parseInt(m[1]!, 16);
        this.cstate = this.chunkLeft === 0 ? Chunked.Trailer : Chunked.Data;
        return;
      }
      case Chunked.DataEnd:
        if (line !== '') {
          this.protocol('chunk data longer than its size');
          return;
        }
        this.cstate = Chunked.Size;
        return;
      case Chunked.Trailer: {
        if (line === '') {
          this.complete();
          return;
        }
        this.trailerBytes += line.length + 2;
        if (this.trailerBytes > MAX_TRAILER_BYTES) {
          this.protocol('trailer fields over 16 KiB');
          return;
        }
        // Not used, but held to the rule of the head's fields, as llhttp holds them; a length among
        // them (a framing field where none may be, RFC 9110 §6.5.1) is refused as llhttp refuses it.
        const field = parseField(line);
        if (field === undefined) this.protocol('a malformed trailer field');
        else if (field[0].toLowerCase() === 'content-length') this.protocol('a content-length among the trailer fields');
        return;
      }
      default:
        return;
    }
  }

  /** Hands on a full (or old) slab; false pauses the socket while the consumer is behind. */
  private afterBodyBytes(): boolean {
    if (this.state !== 'body') return false;
    const room = this.slab.length - this.fill;
    if (room < MIN_READ_BYTES || (this.fill > this.pushed && Date.now() - this.lastPush >= PUSH_AFTER_MS)) this.push();
    // Bytes left in the slab when the server pauses are handed on by the timer, not at the next read.
    if (this.fill > this.pushed && this.pushTimer === undefined) this.pushTimer = setTimeout(() => this.pushLate(), PUSH_AFTER_MS);
    if (this.paused) {
      // The wait is the consumer's now, not the server's: no read timeout until it wants more (as undici).
      this.conn.socket.setTimeout(0);
      return false;
    }
    return true;
  }

  /** The timer's hand-on of a partly filled slab; pauses the socket if the consumer is behind. */
  private pushLate(): void {
    this.pushTimer = undefined;
    if (this.state !== 'body' || this.fill <= this.pushed || this.paused) return;
    try {
      // Never a new slab here: the socket's next read already goes to the rest of this one.
      this.push(false);
    } catch (err) {
      this.internalFault(err); // as in a read callback: nothing is thrown out of a timer either
      return;
    }
    if (this.paused) {
      this.conn.socket.setTimeout(0);
      this.conn.socket.pause();
    }
  }

  private push(nextSlab = true): void {
    const body = this.body!;
    if (this.fill > this.pushed) {
      const chunk = this.slab.subarray(this.pushed, this.fill);
      this.bodyBytes += chunk.length;
      this.pushed = this.fill;
      this.lastPush = Date.now();
      slabPool.lend(chunk);
      if (!body.push(chunk)) this.paused = true;
    }
    if (nextSlab && this.slab.length - this.fill < MIN_READ_BYTES) {
      // The consumer may hold on to what it was given: the next slab, never the same memory twice
      // (a slab is reused only once every chunk of it was recycled, slab-pool.ts).
      slabPool.retire(this.slab);
      this.slab = slabPool.take();
      this.fill = 0;
      this.pushed = 0;
    }
  }

  /** The body's consumer wants more. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    if (this.state === 'body' && !this.conn.socket.destroyed) {
      this.conn.socket.setTimeout(this.readTimeoutMs);
      this.conn.socket.resume();
    }
  }

  private complete(): void {
    if (this.state === 'done') return;
    this.state = 'done';
    this.push();
    this.body!.push(null);
    this.detach();
    if (this.reusable && this.conn.socket.readable && !this.conn.socket.destroyed) {
      this.conn.socket.resume();
      this.release(this.conn);
    } else {
      this.conn.socket.destroy();
    }
  }

  socketEnd(): void {
    if (this.state === 'body' && this.framing.kind === 'close') {
      this.complete();
      return;
    }
    this.fail(this.closedError(), false);
  }

  socketError(err: unknown): void {
    this.fail(err, false);
  }

  timedOut(): void {
    this.fail(new BulkHttpError('ERR_BULK_READ_TIMEOUT', 'no data within the read timeout'), false);
  }

  /** The body was destroyed by its consumer (or by `fail`): the connection goes with it. */
  bodyDestroyed(): void {
    if (this.state !== 'done') this.fail(undefined, false);
  }

  private closedError(): BulkHttpError {
    if (this.state === 'head') return new BulkHttpError('ERR_BULK_CLOSED', 'the connection closed before the response');
    const f = this.framing;
    const expected = f.kind === 'length' ? ` of ${this.bodyBytes + (this.fill - this.pushed) + f.left}` : '';
    return new BulkHttpError(
      'ERR_BULK_CLOSED',
      `the connection closed after ${this.bodyBytes + (this.fill - this.pushed)}${expected} body bytes`,
    );
  }

  private protocol(detail: string): void {
    this.fail(new BulkHttpError('ERR_BULK_PROTOCOL', `malformed response: ${detail}`), false);
  }

  /** Something threw while a read was handled: the exchange fails with the client's protocol code. */
  internalFault(err: unknown): void {
    const name = err instanceof Error ? err.name : typeof err;
    const fault = new BulkHttpError('ERR_BULK_PROTOCOL', `the response could not be read (an internal fault: ${name})`, { cause: err });
    this.fail(fault, false);
    // Ended (a body whole in its first read) but not handed out yet: the request must still settle.
    // A no-op for a promise already settled.
    this.reject(fault);
  }

  private fail(err: unknown, aborted: boolean): void {
    if (this.state === 'done') return;
    this.failed = true;
    this.state = 'done';
    this.detach();
    this.conn.socket.destroy();
    if (!this.handedOut) {
      // A body made in this read (if any) was never seen by anyone.
      this.body?.destroy();
      // Nothing came back on a reused connection: the server closed it while it was idle.
      this.reject(!aborted && this.received === 0 && this.conn.reused ? new StaleConnection(err) : err);
    } else if (err !== undefined && !this.body!.destroyed) {
      this.body!.destroy(err as Error);
    } else if (!this.body!.destroyed) {
      this.body!.destroy();
    }
  }

  private detach(): void {
    if (this.pushTimer !== undefined) clearTimeout(this.pushTimer);
    this.pushTimer = undefined;
    slabPool.retire(this.slab);
    this.req.signal.removeEventListener('abort', this.onAbort);
    if (this.conn.exchange === this) this.conn.exchange = undefined;
  }
}

class BulkBody extends Readable {
  constructor(private readonly exchange: Exchange) {
    super({ highWaterMark: SLAB_BYTES });
    // An error is never uncaught: consumers (pipeline, for await, an SDK's wrapper while it reads)
    // get it from their own listener or from `errored`; a wrapper that let go of the body early
    // (the Azure SDK's retriable stream, destroyed on the caller's abort) must not crash the process.
    this.on('error', () => undefined);
  }

  override _read(): void {
    this.exchange.resume();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.exchange.bodyDestroyed();
    // The body may fail in the read that resolved the response, before the caller awaiting it could
    // add an 'error' listener: emitted now, the error would be uncaught. One turn later, as undici does.
    setImmediate(() => cb(err));
  }
}
