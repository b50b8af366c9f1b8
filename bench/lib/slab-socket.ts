import { connect as netConnect, isIP, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';
import type { buildConnector } from 'undici';
import { type ConnectGuard, guardedConnection } from '../../src/net/connect-guard';
import { slabPool } from '../../src/download/slab-pool';

/** A slab with less room than this is retired and a fresh one read into (a read is ≤ 64 KiB on loopback). */
const MIN_READ_BYTES = 64 * 1024;
/** Reads queued for the parser before the socket is paused (backpressure from a paused body). */
const MAX_QUEUED = 4;

/**
 * A connected socket seen as a plain Duplex whose reads come out of pooled 1 MiB slabs: the socket
 * reads with `onread` straight into the current slab, and every read is one chunk of it. undici's
 * HTTP/1.1 client reads its socket with `read()` and hands body bytes on as views of those chunks,
 * so a body arrives in the slabs without a copy and a consumer can give them back (`slabPool`).
 *
 * A chunk is lent while the parser may hold it: from the time it is queued until the parser's next
 * `read()` (it parses each chunk synchronously; what it cannot take yet it puts back with `unshift`,
 * which lends that remainder again). A slab returns to the pool only when it is retired and every
 * chunk cut from it was given back, so no slab is reused while a byte of it is referenced.
 */
export class SlabSocket extends Duplex {
  private slab: Buffer | undefined;
  private used = 0;
  private readonly queue: Buffer[] = [];
  private wanted = false;
  /** The chunk the parser's last `read()` returned: released at its next one. */
  private handedOut: Buffer | undefined;

  socket!: Socket;

  constructor() {
    super({ readableHighWaterMark: 0, allowHalfOpen: false });
  }

  attach(socket: Socket): void {
    this.socket = socket;
    socket.on('end', () => {
      this.ended = true;
      this.pump();
    });
    socket.on('error', (err) => this.destroy(err));
    socket.on('close', () => {
      if (!this.destroyed) this.destroy();
    });
  }

  private ended = false;

  /** onread's `buffer`: room in the current slab, or a fresh one. */
  buffer(): Uint8Array {
    if (this.slab === undefined || this.slab.length - this.used < MIN_READ_BYTES) {
      if (this.slab !== undefined) slabPool.retire(this.slab);
      this.slab = slabPool.take();
      this.used = 0;
    }
    return this.slab.subarray(this.used);
  }

  /** onread's `callback`: false pauses the socket until the parser has caught up. */
  onRead(n: number, _buf: Uint8Array): boolean {
    const slab = this.slab!;
    const chunk = slab.subarray(this.used, this.used + n);
    this.used += n;
    slabPool.lend(chunk);
    this.queue.push(chunk);
    this.pump();
    if (this.queue.length < MAX_QUEUED) return true;
    // onread's false stops the handle's reads without marking the socket paused: remember it.
    this.socketPaused = true;
    return false;
  }

  private socketPaused = false;

  override read(size?: number): Buffer | null {
    if (this.handedOut !== undefined) {
      slabPool.recycle(this.handedOut);
      this.handedOut = undefined;
    }
    const chunk = super.read(size) as Buffer | null;
    if (chunk !== null) this.handedOut = chunk;
    return chunk;
  }

  override unshift(chunk: Buffer): void {
    slabPool.lend(chunk);
    super.unshift(chunk);
  }

  override _read(): void {
    this.wanted = true;
    // Not in this call: Readable calls _read from inside read(), and a chunk pushed there would be
    // joined (copied) with one the parser put back, out of the slabs.
    queueMicrotask(() => this.pump());
  }

  private pump(): void {
    if (!this.wanted) return;
    const chunk = this.queue.shift();
    if (chunk !== undefined) {
      this.wanted = false;
      this.push(chunk);
      if (this.socketPaused && this.queue.length < MAX_QUEUED && !this.socket.destroyed) {
        this.socketPaused = false;
        this.socket.resume();
      }
    } else if (this.ended) {
      this.wanted = false;
      this.push(null);
    }
  }

  override _write(chunk: Buffer, encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.socket.write(chunk, encoding, callback);
  }

  override _writev(chunks: { chunk: Buffer; encoding: BufferEncoding }[], callback: (err?: Error | null) => void): void {
    this.socket.cork();
    for (const { chunk, encoding } of chunks) this.socket.write(chunk, encoding);
    this.socket.uncork();
    this.socket.write(Buffer.alloc(0), callback);
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.socket.end(callback);
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.socket.destroy();
    for (const c of this.queue.splice(0)) slabPool.recycle(c);
    if (this.slab !== undefined) slabPool.retire(this.slab);
    this.slab = undefined;
    callback(err);
  }

  ref(): this {
    this.socket.ref();
    return this;
  }

  unref(): this {
    this.socket.unref();
    return this;
  }

  setNoDelay(noDelay?: boolean): this {
    this.socket.setNoDelay(noDelay);
    return this;
  }

  setKeepAlive(enable?: boolean, delay?: number): this {
    this.socket.setKeepAlive(enable, delay);
    return this;
  }
}

export interface SlabConnectorOptions {
  guard: ConnectGuard;
  /** Trust store (PEM list) for TLS; Node's default when undefined. */
  ca: string[] | undefined;
  connectTimeoutMs: number;
}

/**
 * undici's `connect` for object bodies: every connection through the restricted-host guard, with
 * its own port (as the plugins' guarded connector), and read into slabs (`SlabSocket`).
 */
export function slabConnector(opts: SlabConnectorOptions): buildConnector.connector {
  return (options, callback) => {
    let done = false;
    const finish = (err: Error | null, socket: SlabSocket | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err !== null) {
        wrapped?.destroy();
        callback(err, null);
      } else callback(null, socket as unknown as Socket);
    };
    let wrapped: SlabSocket | undefined;
    const timer = setTimeout(
      () => finish(Object.assign(new Error(`no connection within ${opts.connectTimeoutMs} ms`), { code: 'UND_ERR_CONNECT_TIMEOUT' }), null),
      opts.connectTimeoutMs,
    );
    try {
      const tls = options.protocol === 'https:';
      const { port, lookup } = guardedConnection(opts.guard, {
        protocol: options.protocol,
        hostname: options.hostname,
        port: options.port,
      });
      const host = options.hostname.replace(/^\[|\]$/g, '');
      const target = new SlabSocket();
      wrapped = target;
      const onread = { buffer: () => target.buffer(), callback: (n: number, buf: Uint8Array) => target.onRead(n, buf) };
      const tlsOptions: ConnectionOptions & { onread: typeof onread } = {
        host,
        port,
        lookup,
        onread,
        ALPNProtocols: ['http/1.1'],
        ...(isIP(host) === 0 ? { servername: options.servername ?? host } : {}),
        ...(opts.ca ? { ca: opts.ca } : {}),
      };
      const socket = tls ? tlsConnect(tlsOptions) : netConnect({ host, port, lookup, onread });
      target.attach(socket);
      socket.setNoDelay(true);
      wrapped.once('error', (err) => finish(err, null));
      socket.once(tls ? 'secureConnect' : 'connect', () => {
        wrapped!.removeAllListeners('error');
        finish(null, wrapped!);
      });
    } catch (err) {
      finish(err as Error, null);
    }
  };
}
