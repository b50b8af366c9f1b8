import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as dns from 'node:dns';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createConnection, createServer, type LookupFunction, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { BulkHttpClient, type BulkHttpOptions, type BulkRequest, type BulkResponse, discardBody } from '../../../src/download/bulk-http';
import type { ConnectGuard } from '../../../src/plugin-kit/fs-plugin';

// The bulk client against real loopback servers. Most are raw node:net servers that write exact
// bytes, so that malformed and oddly split responses can be produced; TLS uses node:https.

const MiB = 1024 * 1024;

/** The guard when gateway.artifacts.disallow-restricted-hosts is off: loopback is allowed. */
const permissive: ConnectGuard = { enabled: false, lookup: dns.lookup, lookupFor: () => dns.lookup, checkHost() {} };

/** Torn down after each test, last first (clients before the servers they talk to). */
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

interface RawOrigin {
  url: URL;
  port: number;
  /** Every connection accepted, in order. */
  sockets: Socket[];
  /** Every request head received (through the blank line), in order. */
  requests: string[];
}

/** Called for each request head; `conn` is the connection's index in `sockets`, `nth` the request's on it. */
type Handler = (sock: Socket, head: string, conn: number, nth: number) => unknown;

/** A node:net server on an ephemeral loopback port that answers GET/HEAD heads with whatever `handler` writes. */
async function rawServer(handler: Handler): Promise<RawOrigin> {
  const sockets: Socket[] = [];
  const requests: string[] = [];
  const server = createServer((sock) => {
    const conn = sockets.push(sock) - 1;
    sock.on('error', () => undefined); // resets by the client under test are expected
    let pending = '';
    let nth = 0;
    sock.on('data', (d: Buffer) => {
      pending += d.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end + 4);
        pending = pending.slice(end + 4);
        requests.push(head);
        // A handler still writing when the client went away (abort, destroy) fails harmlessly.
        Promise.resolve(handler(sock, head, conn, nth++)).catch(() => undefined);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  cleanups.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: new URL(`http://127.0.0.1:${port}`), port, sockets, requests };
}

function client(opts: Partial<BulkHttpOptions> = {}): BulkHttpClient {
  // Generous defaults, so a loaded machine's pauses never look like a stalled server; the timeout
  // tests pass their own.
  const c = new BulkHttpClient({ guard: permissive, connectTimeoutMs: 10_000, readTimeoutMs: 10_000, ...opts });
  cleanups.push(() => c.close());
  return c;
}

function get(c: BulkHttpClient, o: { url: URL }, req: Partial<BulkRequest> = {}): Promise<BulkResponse> {
  return c.request({ origin: o.url, path: '/object', method: 'GET', headers: {}, signal: new AbortController().signal, ...req });
}

async function readAll(body: Readable): Promise<{ data: Buffer; chunks: Buffer[] }> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return { data: Buffer.concat(chunks), chunks };
}

async function text(res: BulkResponse): Promise<string> {
  return (await readAll(res.body)).data.toString('latin1');
}

/** The error a request fails with: its own, or its body's when the response came first. */
async function failure(response: Promise<BulkResponse>): Promise<Error & { code?: string }> {
  let res: BulkResponse;
  try {
    res = await response;
  } catch (err) {
    return err as Error & { code?: string };
  }
  return bodyError(res.body);
}

/** The error the body fails with (or a test failure if it ends cleanly). */
async function bodyError(body: Readable): Promise<Error & { code?: string }> {
  try {
    await readAll(body);
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('the body ended without an error');
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A 200 head with Content-Length for `body`, and the body. */
function ok(body: Buffer | string, fields = ''): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
  return Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${b.length}\r\n${fields}\r\n`, 'latin1'), b]);
}

/** Resolves when the server side of a connection has closed (after an error, such as a reset, too). */
function closed(sock: Socket): Promise<void> {
  return new Promise((resolve) => (sock.destroyed ? resolve() : sock.once('close', () => resolve())));
}

/** Writes `bytes` one at a time, each in its own event-loop turn, so that the client reads each alone. */
async function writeBytewise(sock: Socket, bytes: Buffer): Promise<void> {
  sock.setNoDelay(true);
  for (let i = 0; i < bytes.length; i++) {
    sock.write(bytes.subarray(i, i + 1));
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function chunkedBody(data: Buffer, sizes: readonly number[]): Buffer {
  const parts: Buffer[] = [];
  for (let off = 0, i = 0; off < data.length; i++) {
    const n = Math.min(sizes[i % sizes.length]!, data.length - off);
    const hex = i % 2 === 0 ? n.toString(16) : n.toString(16).toUpperCase();
    const ext = i % 3 === 0 ? `;i=${i}` : '';
    parts.push(Buffer.from(`${hex}${ext}\r\n`, 'latin1'), data.subarray(off, off + n), Buffer.from('\r\n'));
    off += n;
  }
  parts.push(Buffer.from('0\r\nx-checksum: none\r\n\r\n'));
  return Buffer.concat(parts);
}

const CHUNKED_HEAD = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
/** Extensions (bare, with a value, quoted with an escape), leading zeros, both hex cases, CRLF inside data, trailers. */
const CHUNKED_WIRE =
  '4;ext=1\r\nWiki\r\n5;name="quoted; \\"value\\""\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n000a\r\n0123456789\r\n1B\r\nabcdefghijklmnopqrstuvwxyz!\r\n0;last\r\nExpires: never\r\nX-Trailer: y\r\n\r\n';
const CHUNKED_DATA = 'Wikipedia in\r\n\r\nchunks.0123456789abcdefghijklmnopqrstuvwxyz!';

describe('Content-Length bodies', () => {
  it('reads a 5 MiB body byte-exact, as Buffer chunks of at most 1 MiB read straight into 1 MiB slabs', async () => {
    const data = randomBytes(5 * MiB);
    const o = await rawServer((s) => s.write(ok(data)));
    const res = await get(client(), o);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(String(data.length));
    const { data: got, chunks } = await readAll(res.body);
    // Hashed after the last chunk came: a slab reused while its chunks were still held would show here.
    expect(got.length).toBe(data.length);
    expect(sha(got)).toBe(sha(data));
    expect(chunks.length).toBeGreaterThanOrEqual(5);
    for (const c of chunks) {
      expect(Buffer.isBuffer(c)).toBe(true);
      expect(c.length).toBeGreaterThan(0);
      expect(c.length).toBeLessThanOrEqual(MiB);
      expect(c.buffer.byteLength).toBe(MiB);
    }
  });

  it('gives lower-case header names, trimmed values, and an array for a field sent twice', async () => {
    const o = await rawServer((s) => s.write(ok('x', 'ETag:   "abc"  \r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nX-Empty:\r\n')));
    const res = await get(client(), o);
    expect(res.headers).toEqual({ 'content-length': '1', etag: '"abc"', 'set-cookie': ['a=1', 'b=2'], 'x-empty': '' });
    expect(await text(res)).toBe('x');
  });

  it('reads a body whose head and bytes arrive one byte at a time', async () => {
    const o = await rawServer((s) => writeBytewise(s, ok('hello, world')));
    expect(await text(await get(client(), o))).toBe('hello, world');
  });

  it('a HEAD response has an empty body whatever its Content-Length says, and the connection is reused', async () => {
    const o = await rawServer((s, head) =>
      s.write(head.startsWith('HEAD') ? 'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n' : ok('after head')),
    );
    const c = client();
    const res = await get(c, o, { method: 'HEAD' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe('1000');
    expect((await readAll(res.body)).data.length).toBe(0);
    expect(await text(await get(c, o))).toBe('after head');
    expect(o.sockets).toHaveLength(1);
  });

  it.each([
    ['204 No Content', 'HTTP/1.1 204 No Content\r\n\r\n'],
    ['304 Not Modified with a Content-Length', 'HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: "e"\r\n\r\n'],
    ['Content-Length: 0', 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'],
  ])('%s has an empty body, and the connection is reused', async (_name, head) => {
    const o = await rawServer((s, _h, _c, nth) => s.write(nth === 0 ? head : ok('second')));
    const c = client();
    const res = await get(c, o);
    expect(res.statusCode).toBe(Number(head.slice(9, 12)));
    expect((await readAll(res.body)).data.length).toBe(0);
    expect(await text(await get(c, o))).toBe('second');
    expect(o.sockets).toHaveLength(1);
  });
});

describe('chunked bodies', () => {
  it('decodes extensions, leading zeros, both hex cases and CRLF in data, and ignores trailers', async () => {
    const o = await rawServer((s) => s.write(CHUNKED_HEAD + CHUNKED_WIRE));
    const c = client();
    const res = await get(c, o);
    expect(res.headers['transfer-encoding']).toBe('chunked');
    expect(res.headers['x-trailer']).toBeUndefined();
    expect(await text(res)).toBe(CHUNKED_DATA);
    // Reading to the end returned the connection (the trailers were consumed, not left for the next response).
    expect(await text(await get(c, o))).toBe(CHUNKED_DATA);
    expect(o.sockets).toHaveLength(1);
  });

  it('decodes a response written one byte at a time (every split of size lines, CRLFs, data and trailers)', async () => {
    const o = await rawServer((s) => writeBytewise(s, Buffer.from(CHUNKED_HEAD + CHUNKED_WIRE, 'latin1')));
    expect(await text(await get(client(), o))).toBe(CHUNKED_DATA);
  });

  it('decodes the response split into two writes at every offset, on one kept-alive connection', async () => {
    const wire = Buffer.from(CHUNKED_HEAD + CHUNKED_WIRE, 'latin1');
    const o = await rawServer(async (s, _h, _c, nth) => {
      s.setNoDelay(true);
      const at = nth + 1;
      s.write(wire.subarray(0, at));
      await sleep(1);
      s.write(wire.subarray(at));
    });
    const c = client();
    for (let at = 1; at < wire.length; at++) expect([at, await text(await get(c, o))]).toEqual([at, CHUNKED_DATA]);
    expect(o.sockets).toHaveLength(1);
  });

  it('decodes a 6 MiB body of varied chunk sizes (1 byte to 2.5 MiB) byte-exact, in chunks of at most 1 MiB', async () => {
    const data = randomBytes(6 * MiB + 12345);
    const sizes = [1, 2, 7, 100, 4096, 65535, 65536, 65537, 300_000, MiB - 1, MiB, MiB + 1, 2.5 * MiB, 3, 999_999];
    const o = await rawServer((s) => s.write(Buffer.concat([Buffer.from(CHUNKED_HEAD), chunkedBody(data, sizes)])));
    const { data: got, chunks } = await readAll((await get(client(), o)).body);
    expect(got.length).toBe(data.length);
    expect(sha(got)).toBe(sha(data));
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(MiB);
  });

  it('leading zeros of any number before a size are read past (as llhttp does)', async () => {
    const o = await rawServer((s) => s.write(`${CHUNKED_HEAD}${'0'.repeat(40)}5\r\nhello\r\n${'0'.repeat(40)}\r\n\r\n`));
    expect(await text(await get(client(), o))).toBe('hello');
  });

  it.each([
    ['a size that is not hex', 'zz\r\nhello\r\n0\r\n\r\n'],
    ['a size with a sign', '+5\r\nhello\r\n0\r\n\r\n'],
    ['a size of 13 significant hex digits', '1000000000000\r\nhello\r\n0\r\n\r\n'],
    ['white space after the size', '5 \r\nhello\r\n0\r\n\r\n'],
    ['white space before an extension', '5 ;a=b\r\nhello\r\n0\r\n\r\n'],
    ['an extension without a name', '5;=b\r\nhello\r\n0\r\n\r\n'],
    ['an extension value with a space', '5;a=b c\r\nhello\r\n0\r\n\r\n'],
    ['an unterminated quoted extension value', '5;a="b\r\nhello\r\n0\r\n\r\n'],
    ['a control character in an extension', '5;a=\x01\r\nhello\r\n0\r\n\r\n'],
    ['a trailer field without a colon', '0\r\nNoColon\r\n\r\n'],
    ['a trailer field with a control character', '0\r\nX-T: a\x01b\r\n\r\n'],
    ['a folded trailer field', '0\r\nX-T: a\r\n b\r\n\r\n'],
    ['a trailer field with white space before the colon', '0\r\nX-T : a\r\n\r\n'],
    ['a Content-Length among the trailer fields', '5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n'],
    ['an empty size line', '\r\nhello\r\n0\r\n\r\n'],
    ['data longer than its size', '3\r\nhello\r\n0\r\n\r\n'],
    ['data not followed by CRLF', '5\r\nhelloX0\r\n\r\n'],
    ['a size line ended by a bare LF', '5\nhello\r\n0\r\n\r\n'],
    ['a size line over 4096 bytes', `5;${'a'.repeat(5000)}\r\nhello\r\n0\r\n\r\n`],
    ['a size line over 4096 bytes with no end yet', `5;${'a'.repeat(5000)}`],
    ['trailer fields over 16 KiB', `0\r\n${`X-T: ${'v'.repeat(1000)}\r\n`.repeat(20)}\r\n`],
  ])(
    "%s → ERR_BULK_PROTOCOL (the request's, or the body's when it came in a later read), and the connection is closed",
    async (_name, wire) => {
      for (const split of [false, true]) {
        const o = await rawServer(async (s) => {
          if (!split) return s.write(CHUNKED_HEAD + wire);
          s.write(CHUNKED_HEAD);
          await sleep(30);
          s.write(wire);
        });
        const err = await failure(get(client(), o));
        expect(err).toMatchObject({ code: 'ERR_BULK_PROTOCOL' });
        expect(err.message).toMatch(/^malformed response: /);
        await closed(o.sockets[0]!);
      }
    },
  );

  it.each([
    ['a malformed chunk size', 'zz\r\n', 'a malformed chunk size'],
    ['data longer than its size', '3\r\nhello\r\n', 'chunk data longer than its size'],
    ['a bare LF after the data', '5\r\nhello\n', 'a chunked-body line not ended by CRLF'],
    ['a bare LF in the trailers', '5\r\nhello\r\n0\r\nX-T: 1\n', 'a chunked-body line not ended by CRLF'],
  ])(
    '%s in the read that brought the head rejects the request itself: no caller holds a body that failed before it could listen',
    async (_name, wire, message) => {
      // Failed in that read, the body would carry the client's own error past any translation its
      // caller adds once it has the body (the HTTP plugin's, for one): a 500 instead of a fetch error.
      const o = await rawServer((s) => s.write(CHUNKED_HEAD + wire));
      await expect(get(client(), o)).rejects.toMatchObject({ code: 'ERR_BULK_PROTOCOL', message: `malformed response: ${message}` });
      await closed(o.sockets[0]!);
    },
  );

  it('a body that is whole in the read that brought its head is handed out complete, and the connection is reused', async () => {
    const o = await rawServer((s) => s.write(`${CHUNKED_HEAD}5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n`));
    const c = client();
    expect(await text(await get(c, o))).toBe('hello');
    expect(await text(await get(c, o))).toBe('hello');
    expect(o.sockets).toHaveLength(1);
  });

  it.each([
    // A full slab is handed on inside the socket's read callback.
    ['a read', () => ok(randomBytes(2 * MiB))],
    // A partly filled slab of a body still arriving is handed on by a timer.
    ['the hand-on timer', () => Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello', 'latin1')],
  ])(
    "an exception thrown in %s (here by a consumer's data listener) fails the exchange instead of escaping the callback",
    async (_where, response) => {
      const bytes = response();
      const o = await rawServer((s) => s.write(bytes));
      const res = await get(client(), o);
      let thrown = 0;
      const failed = new Promise<Error>((resolve) => res.body.on('error', resolve));
      res.body.on('data', () => {
        thrown++;
        throw new RangeError('a consumer fault');
      });
      const err = (await failed) as Error & { code?: string };
      expect(thrown).toBe(1);
      expect(err).toMatchObject({ code: 'ERR_BULK_PROTOCOL', message: 'the response could not be read (an internal fault: RangeError)' });
      expect(err.cause).toMatchObject({ message: 'a consumer fault' });
      await closed(o.sockets[0]!);
    },
  );

  it('a malformed chunk after data was handed on fails the body with ERR_BULK_PROTOCOL', async () => {
    const o = await rawServer(async (s) => {
      s.write(`${CHUNKED_HEAD}5\r\nhello\r\n`);
      await sleep(150);
      s.write('5\r\nworld\r\n'); // over 100 ms since the head: the slab so far is handed on
      await sleep(150);
      s.write('q\r\n');
    });
    const res = await get(client(), o);
    const chunks: string[] = [];
    res.body.on('data', (c: Buffer) => chunks.push(c.toString()));
    expect(await bodyError(res.body)).toMatchObject({ code: 'ERR_BULK_PROTOCOL' });
    expect(chunks.join('')).toBe('helloworld');
  });
});

describe('close-delimited bodies', () => {
  it.each([
    ['an HTTP/1.0 response without a length', 'HTTP/1.0 200 OK\r\n'],
    ['an HTTP/1.1 response without a length', 'HTTP/1.1 200 OK\r\n'],
  ])('%s is read to EOF, and the connection is not reused', async (_name, statusLine) => {
    const data = randomBytes(3 * MiB + 7);
    const o = await rawServer((s) => {
      s.write(`${statusLine}Content-Type: application/octet-stream\r\n\r\n`);
      s.end(data);
    });
    const c = client();
    const first = await readAll((await get(c, o)).body);
    expect(sha(first.data)).toBe(sha(data));
    const second = await readAll((await get(c, o)).body);
    expect(sha(second.data)).toBe(sha(data));
    expect(o.sockets).toHaveLength(2);
  });

  it('an HTTP/1.0 response with a Content-Length is read by its length, and the connection is not reused', async () => {
    const o = await rawServer((s) => s.write('HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello'));
    const c = client();
    expect(await text(await get(c, o))).toBe('hello');
    expect(await text(await get(c, o))).toBe('hello');
    expect(o.sockets).toHaveLength(2);
  });
});

describe('framing errors', () => {
  it.each([
    ['a four-digit status code', 'HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n'],
    ['a status code below 100', 'HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n'],
    ['HTTP/2 in the status line', 'HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n'],
    ['HTTP/1.2 in the status line', 'HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n'],
    ['no space after the status code', 'HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n'],
    ['not HTTP at all', 'ICY 200 OK\r\nContent-Length: 0\r\n\r\n'],
    ['obs-fold', 'HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 0\r\n\r\n'],
    ['a field without a colon', 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\nNoColon\r\n\r\n'],
    ['white space before the colon', 'HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n'],
    ['a bare LF inside the head', 'HTTP/1.1 200 OK\r\nX-A: b\nContent-Length: 0\r\n\r\n'],
    ['a control character in a value', 'HTTP/1.1 200 OK\r\nX-A: b\x01c\r\nContent-Length: 0\r\n\r\n'],
    ['Content-Length: 5, 6', 'HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello!'],
    ['two Content-Length fields that differ', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!'],
    ['a non-numeric Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello'],
    ['a negative Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n'],
    ['an empty Content-Length', 'HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n'],
    ['Transfer-Encoding: gzip', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello'],
    ['Transfer-Encoding: gzip, chunked', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'],
    [
      'Transfer-Encoding: chunked sent twice',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ],
    // Both framings, or one length said twice: refused as llhttp (undici, node:http) refuses them.
    [
      'Transfer-Encoding: chunked with Content-Length',
      `HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNKED_WIRE}`,
    ],
    [
      'Transfer-Encoding: chunked with Content-Length on a 204',
      'HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n',
    ],
    ['identical duplicate Content-Length fields', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello'],
    ['a Content-Length list of one value', 'HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello'],
    ['101 Switching Protocols', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n'],
  ])('%s → ERR_BULK_PROTOCOL, and the connection is closed', async (_name, response) => {
    const o = await rawServer((s) => s.write(response));
    const err = await get(client(), o).catch((e: unknown) => e as Error);
    expect(err).toMatchObject({ code: 'ERR_BULK_PROTOCOL', name: 'BulkHttpError' });
    expect((err as Error).message).toMatch(/^malformed response: /);
    await closed(o.sockets[0]!);
  });

  it('a Content-Length with leading zeros is accepted', async () => {
    const o = await rawServer((s) => s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${'0'.repeat(30)}5\r\n\r\nhello`));
    expect(await text(await get(client(), o))).toBe('hello');
  });

  it('a response head that grows past 64 KiB without ending → ERR_BULK_PROTOCOL (not a wait for more)', async () => {
    const o = await rawServer((s) => s.write(`HTTP/1.1 200 OK\r\n${`X-Pad: ${'a'.repeat(1000)}\r\n`.repeat(70)}`));
    await expect(get(client({ readTimeoutMs: 5000 }), o)).rejects.toMatchObject({ code: 'ERR_BULK_PROTOCOL' });
  });

  it('a complete response head over 64 KiB, written at once → ERR_BULK_PROTOCOL', async () => {
    const o = await rawServer((s) =>
      s.write(`HTTP/1.1 200 OK\r\n${`X-Pad: ${'a'.repeat(1000)}\r\n`.repeat(100)}Content-Length: 2\r\n\r\nok`),
    );
    await expect(get(client(), o)).rejects.toMatchObject({ code: 'ERR_BULK_PROTOCOL' });
  });

  it('a response head of 60 KiB is accepted', async () => {
    const o = await rawServer((s) =>
      s.write(`HTTP/1.1 200 OK\r\n${`X-Pad: ${'a'.repeat(1000)}\r\n`.repeat(60)}Content-Length: 2\r\n\r\nok`),
    );
    expect(await text(await get(client(), o))).toBe('ok');
  });

  it('skips 100 Continue and 103 Early Hints before the final response, in one write or split', async () => {
    const interim = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n';
    const o = await rawServer(async (s, _h, _c, nth) => {
      if (nth === 0) return s.write(interim + ok('final').toString('latin1'));
      s.write(interim.slice(0, 30));
      await sleep(20);
      s.write(interim.slice(30));
      await sleep(20);
      s.write(ok('final, split'));
    });
    const c = client();
    const first = await get(c, o);
    expect(first.statusCode).toBe(200);
    expect(first.headers.link).toBeUndefined();
    expect(await text(first)).toBe('final');
    const second = await get(c, o);
    expect(second.statusCode).toBe(200);
    expect(await text(second)).toBe('final, split');
    expect(o.sockets).toHaveLength(1);
  });
});

describe('truncation', () => {
  it('a server that closes after part of a Content-Length body → the body fails with ERR_BULK_CLOSED naming the bytes', async () => {
    const o = await rawServer((s) => s.end(`HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n${'x'.repeat(50)}`));
    const res = await get(client(), o);
    const err = await bodyError(res.body);
    expect(err).toMatchObject({ code: 'ERR_BULK_CLOSED' });
    expect(err.message).toBe('the connection closed after 50 of 100 body bytes');
  });

  it('a server that closes after 2 MiB of a 3 MiB body → ERR_BULK_CLOSED after the bytes that came', async () => {
    const data = randomBytes(2 * MiB);
    const o = await rawServer((s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${3 * MiB}\r\n\r\n`);
      s.end(data);
    });
    const res = await get(client(), o);
    const got: Buffer[] = [];
    res.body.on('data', (c: Buffer) => got.push(c));
    const err = await bodyError(res.body);
    expect(err).toMatchObject({ code: 'ERR_BULK_CLOSED' });
    expect(err.message).toBe(`the connection closed after ${2 * MiB} of ${3 * MiB} body bytes`);
    // What was handed on before the failure is a prefix of what was sent.
    const prefix = Buffer.concat(got);
    expect(prefix.equals(data.subarray(0, prefix.length))).toBe(true);
  });

  it('a server that closes inside a chunk → the body fails with ERR_BULK_CLOSED', async () => {
    const o = await rawServer((s) => s.end(`${CHUNKED_HEAD}a\r\n01234`));
    const err = await bodyError((await get(client(), o)).body);
    expect(err).toMatchObject({ code: 'ERR_BULK_CLOSED' });
    expect(err.message).toMatch(/^the connection closed after \d+ body bytes$/);
  });

  it.each([
    ['before any response', ''],
    ['inside the response head', 'HTTP/1.1 200 OK\r\nContent-Le'],
  ])('a fresh connection the server closes %s → ERR_BULK_CLOSED, not retried', async (_name, partial) => {
    const o = await rawServer((s) => s.end(partial));
    await expect(get(client(), o)).rejects.toMatchObject({ code: 'ERR_BULK_CLOSED', message: 'the connection closed before the response' });
    expect(o.sockets).toHaveLength(1);
  });
});

describe('keep-alive', () => {
  const tagged = (conn: number, nth: number) => ok(`c${conn}-r${nth}`);

  it('two sequential requests use one connection', async () => {
    const o = await rawServer((s, _h, conn, nth) => s.write(tagged(conn, nth)));
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    expect(await text(await get(c, o))).toBe('c0-r1');
    expect(o.sockets).toHaveLength(1);
  });

  it('a response with Connection: close makes the next request open a new connection', async () => {
    const o = await rawServer((s, _h, conn, nth) => s.write(ok(`c${conn}-r${nth}`, 'Connection: close\r\n')));
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    expect(await text(await get(c, o))).toBe('c1-r0');
    expect(o.sockets).toHaveLength(2);
    await closed(o.sockets[0]!);
  });

  it('a kept-alive connection the server closed while idle is replaced by a new one', async () => {
    const o = await rawServer((s, _h, conn, nth) => {
      s.write(tagged(conn, nth));
      if (conn === 0) setTimeout(() => s.end(), 20);
    });
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    await sleep(80);
    expect(await text(await get(c, o))).toBe('c1-r0');
    expect(o.sockets).toHaveLength(2);
  });

  it('a kept-alive connection the server closes on the next request is retried once on a new connection', async () => {
    const o = await rawServer((s, _h, conn, nth) => (conn === 0 && nth === 1 ? s.destroy() : s.write(tagged(conn, nth))));
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    expect(await text(await get(c, o))).toBe('c1-r0');
    expect(o.requests).toHaveLength(3);
    expect(o.sockets).toHaveLength(2);
  });

  it('the retry is made once: when the new connection closes too, the request fails with ERR_BULK_CLOSED', async () => {
    const o = await rawServer((s, _h, conn, nth) => (conn === 0 && nth === 0 ? s.write(tagged(conn, nth)) : s.destroy()));
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    await expect(get(c, o)).rejects.toMatchObject({ code: 'ERR_BULK_CLOSED' });
    expect(o.sockets).toHaveLength(2);
  });

  it('a server that sends bytes on an idle connection: that connection is dropped, the next request works', async () => {
    const o = await rawServer((s, _h, conn, nth) => {
      s.write(tagged(conn, nth));
      if (conn === 0) setTimeout(() => s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale'), 20);
    });
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    // The client drops the connection when the stray bytes come (not after a fixed wait: on a loaded
    // machine the server's timer may fire late).
    await closed(o.sockets[0]!);
    expect(await text(await get(c, o))).toBe('c1-r0');
    expect(o.sockets).toHaveLength(2);
  });

  it.each([
    ['a Content-Length body', ok('c0-r0').toString('latin1')],
    ['a chunked body', `${CHUNKED_HEAD}5\r\nc0-r0\r\n0\r\n\r\n`],
  ])('bytes after %s in the same write: the connection is not reused', async (_name, response) => {
    const o = await rawServer((s, _h, conn, nth) =>
      s.write(conn === 0 ? `${response}HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra` : tagged(conn, nth)),
    );
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    expect(await text(await get(c, o))).toBe('c1-r0');
    expect(o.sockets).toHaveLength(2);
  });

  it('keeps at most 16 idle connections per origin', async () => {
    const o = await rawServer((s, _h, conn, nth) => s.write(tagged(conn, nth)));
    const c = client();
    const batch = () => Promise.all(Array.from({ length: 18 }, async () => text(await get(c, o))));
    expect(new Set(await batch()).size).toBe(18);
    expect(o.sockets).toHaveLength(18);
    expect(new Set(await batch()).size).toBe(18);
    expect(o.sockets).toHaveLength(20); // 16 reused, 2 new
  });

  it('close() closes idle connections, and later requests fail with ERR_BULK_CLOSED', async () => {
    const o = await rawServer((s, _h, conn, nth) => s.write(tagged(conn, nth)));
    const c = client();
    expect(await text(await get(c, o))).toBe('c0-r0');
    await c.close();
    await closed(o.sockets[0]!);
    await expect(get(c, o)).rejects.toMatchObject({ code: 'ERR_BULK_CLOSED' });
    expect(o.sockets).toHaveLength(1);
  });
});

describe('backpressure', () => {
  it('stops reading the socket while the body is not consumed, then delivers every byte', async () => {
    const data = randomBytes(64 * MiB);
    let flushed = 0; // bytes the server's kernel accepted
    let refused = false;
    const o = await rawServer(async (s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${data.length}\r\n\r\n`);
      for (let off = 0; off < data.length; off += 64 * 1024) {
        const piece = data.subarray(off, off + 64 * 1024);
        if (!s.write(piece, () => (flushed += piece.length))) {
          refused = true;
          await once(s, 'drain');
        }
      }
    });
    const res = await get(client({ readTimeoutMs: 5000 }), o);
    await sleep(300);
    const held = flushed;
    await sleep(100);
    expect(refused).toBe(true);
    expect(flushed).toBe(held); // nothing more moves while nobody reads
    expect(held).toBeLessThan(24 * MiB); // the client's buffers plus both kernels' socket buffers (~8 MiB measured)
    expect(res.body.readableLength).toBeLessThanOrEqual(3 * MiB); // what the client itself read
    const got = await readAll(res.body);
    expect(got.data.length).toBe(data.length);
    expect(sha(got.data)).toBe(sha(data));
  });

  it('a consumer that holds the body back longer than the read timeout is not timed out', async () => {
    const data = randomBytes(16 * MiB);
    const o = await rawServer((s) => s.write(ok(data)));
    // A read timeout with room for a loaded machine's pauses while the first MiB arrives.
    const res = await get(client({ readTimeoutMs: 1000 }), o);
    await sleep(2500);
    expect(sha((await readAll(res.body)).data)).toBe(sha(data));
  });

  it('after the consumer resumes, a stalled server is timed out again', async () => {
    const data = randomBytes(16 * MiB);
    const o = await rawServer((s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${data.length + 1}\r\n\r\n`);
      s.write(data);
    });
    const res = await get(client({ readTimeoutMs: 200 }), o);
    await sleep(400);
    expect(await bodyError(res.body)).toMatchObject({ code: 'ERR_BULK_READ_TIMEOUT' });
  }, 5000);
});

describe('abort', () => {
  it('a signal aborted before the request rejects with its reason, and connects nowhere', async () => {
    const o = await rawServer((s) => s.write(ok('x')));
    const ac = new AbortController();
    const reason = new Error('job cancelled');
    ac.abort(reason);
    await expect(get(client(), o, { signal: ac.signal })).rejects.toBe(reason);
    await sleep(20);
    expect(o.sockets).toHaveLength(0);
  });

  it('aborting before the head rejects with the reason and closes the connection', async () => {
    const o = await rawServer(() => undefined);
    const ac = new AbortController();
    const reason = new Error('job cancelled');
    const pending = get(client(), o, { signal: ac.signal });
    await sleep(50);
    ac.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await closed(o.sockets[0]!);
  });

  it('aborting mid-body destroys the body with the reason and closes the connection', async () => {
    const o = await rawServer((s) => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${10 * MiB}\r\n\r\n`);
      s.write(randomBytes(2 * MiB));
    });
    const ac = new AbortController();
    const reason = new Error('job cancelled');
    const res = await get(client(), o, { signal: ac.signal });
    const failed = bodyError(res.body);
    await sleep(50);
    ac.abort(reason);
    expect(await failed).toBe(reason);
    await closed(o.sockets[0]!);
  });

  it('destroying the body early closes the connection, and the next request opens a new one', async () => {
    const o = await rawServer((s, _h, conn) => s.write(conn === 0 ? ok(randomBytes(4 * MiB)) : ok('next')));
    const c = client();
    const res = await get(c, o);
    const [first] = (await once(res.body, 'data')) as [Buffer];
    expect(first.length).toBeGreaterThan(0);
    res.body.destroy();
    await closed(o.sockets[0]!);
    expect(await text(await get(c, o))).toBe('next');
    expect(o.sockets).toHaveLength(2);
  });

  it('aborting after the body was read leaves the kept-alive connection alone', async () => {
    const o = await rawServer((s, _h, conn, nth) => s.write(ok(`c${conn}-r${nth}`)));
    const c = client();
    const ac = new AbortController();
    expect(await text(await get(c, o, { signal: ac.signal }))).toBe('c0-r0');
    ac.abort(new Error('late'));
    expect(await text(await get(c, o))).toBe('c0-r1');
    expect(o.sockets).toHaveLength(1);
  });
});

describe('timeouts', () => {
  it('a server that accepts but never answers → ERR_BULK_READ_TIMEOUT', async () => {
    const o = await rawServer(() => undefined);
    const started = Date.now();
    await expect(get(client({ readTimeoutMs: 200 }), o)).rejects.toMatchObject({ code: 'ERR_BULK_READ_TIMEOUT' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    await closed(o.sockets[0]!);
  });

  it('a server that stalls mid-body → the body fails with ERR_BULK_READ_TIMEOUT', async () => {
    const o = await rawServer((s) => s.write(`HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n${'x'.repeat(10)}`));
    const res = await get(client({ readTimeoutMs: 200 }), o);
    expect(await bodyError(res.body)).toMatchObject({ code: 'ERR_BULK_READ_TIMEOUT' });
    await closed(o.sockets[0]!);
  });

  it('the read timeout is per wait, not per body; a slow origin still shows progress before its body ends', async () => {
    const o = await rawServer(async (s) => {
      s.setNoDelay(true);
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n');
      for (const b of 'abcdef') {
        await sleep(400);
        s.write(b);
      }
    });
    // Six gaps of 400 ms outlast one 1500 ms timeout, while each gap leaves a loaded machine over 1 s of room.
    const res = await get(client({ readTimeoutMs: 1500 }), o);
    const { data, chunks } = await readAll(res.body);
    expect(data.toString()).toBe('abcdef');
    expect(chunks.length).toBeGreaterThan(1);
  });

  it('bytes received just before the server pauses are handed on by a timer, not only at the next read', async () => {
    let finish: () => void = () => undefined;
    const o = await rawServer((s) => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n' + 'x'.repeat(1000));
      finish = () => s.write('y'.repeat(1000));
    });
    const res = await get(client({ readTimeoutMs: 5000 }), o);
    const first = await new Promise<Buffer>((resolve) =>
      res.body.once('data', (c: Buffer) => {
        res.body.pause();
        resolve(c);
      }),
    );
    expect(first.toString()).toBe('x'.repeat(1000)); // while the server sends nothing more
    finish();
    const { data } = await readAll(res.body);
    expect(data.toString()).toBe('y'.repeat(1000));
  });

  describe('connect timeout', () => {
    /** A listener in a stopped process with its accept queue filled: a further SYN is dropped, the connect hangs. */
    async function fullBacklog(): Promise<number> {
      const child = spawn(
        process.execPath,
        ['-e', "const s=require('net').createServer();s.listen({port:0,host:'127.0.0.1',backlog:1},()=>console.log(s.address().port))"],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const fillers: Socket[] = [];
      cleanups.push(() => {
        for (const f of fillers) f.destroy();
        child.kill('SIGKILL');
      });
      const [line] = (await once(child.stdout!, 'data')) as [Buffer];
      const port = Number(line.toString().trim());
      child.kill('SIGSTOP');
      await sleep(20);
      for (let i = 0; i < 16; i++) {
        const f = createConnection({ host: '127.0.0.1', port });
        f.on('error', () => undefined);
        fillers.push(f);
        const connected = await Promise.race([once(f, 'connect').then(() => true), sleep(100).then(() => false)]);
        if (!connected) return port;
      }
      throw new Error('the accept queue did not fill');
    }

    it('a server that does not complete the handshake → ERR_BULK_CONNECT_TIMEOUT', async () => {
      const port = await fullBacklog();
      const started = Date.now();
      await expect(get(client({ connectTimeoutMs: 300 }), { url: new URL(`http://127.0.0.1:${port}`) })).rejects.toMatchObject({
        code: 'ERR_BULK_CONNECT_TIMEOUT',
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    });

    it('aborting while connecting rejects with the reason', async () => {
      const port = await fullBacklog();
      const ac = new AbortController();
      const reason = new Error('job cancelled');
      const pending = get(client({ connectTimeoutMs: 5000 }), { url: new URL(`http://127.0.0.1:${port}`) }, { signal: ac.signal });
      await sleep(50);
      ac.abort(reason);
      await expect(pending).rejects.toBe(reason);
    });
  });
});

describe('the request', () => {
  it('is sent exactly as given, with host added from the origin', async () => {
    const o = await rawServer((s) => s.write(ok('')));
    const path = '/bucket/k%20ey.jar?x-id=GetObject&a=%2F~';
    const headers = {
      'x-amz-date': '20240101T000000Z',
      Authorization: 'AWS4-HMAC-SHA256 Credential=a/b, Signature=c',
      range: 'bytes=0-99',
    };
    await text(await get(client(), o, { path, headers }));
    expect(o.requests).toEqual([
      `GET ${path} HTTP/1.1\r\nx-amz-date: 20240101T000000Z\r\nAuthorization: AWS4-HMAC-SHA256 Credential=a/b, Signature=c\r\nrange: bytes=0-99\r\nhost: 127.0.0.1:${o.port}\r\n\r\n`,
    ]);
  });

  it('keeps a given Host field and adds none', async () => {
    const o = await rawServer((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n'));
    await text(await get(client(), o, { method: 'HEAD', path: '/', headers: { Host: 'bucket.s3.example:9000' } }));
    expect(o.requests).toEqual(['HEAD / HTTP/1.1\r\nHost: bucket.s3.example:9000\r\n\r\n']);
  });

  it.each([
    ['a header value with CR LF', { headers: { 'x-a': 'v\r\nx-injected: 1' } }],
    ['a header value with a bare LF', { headers: { 'x-a': 'v\nx-injected: 1' } }],
    ['a header value with NUL', { headers: { 'x-a': 'v\0x-injected' } }],
    ['a header value beyond Latin-1', { headers: { 'x-a': 'x-injected\u20ac' } }],
    ['a header name with a space', { headers: { 'x a': 'x-injected' } }],
    ['a header name with a colon', { headers: { 'x:a': 'x-injected' } }],
    ['an empty header name', { headers: { '': 'x-injected' } }],
    ['a path with a space', { path: '/a b?x-injected' }],
    ['a path with CR LF', { path: '/a\r\nx-injected: 1' }],
    ['a path with a non-ASCII character', { path: '/\u00e4?x-injected' }],
    ['a path without the leading slash', { path: 'a?x-injected' }],
    ['an absolute-form target', { path: 'http://x-injected/' }],
  ])('%s → ERR_BULK_PROTOCOL before anything is sent, naming neither path nor value', async (_name, req: Partial<BulkRequest>) => {
    const o = await rawServer((s) => s.write(ok('')));
    const err = await get(client(), o, req).catch((e: unknown) => e as Error);
    expect(err).toMatchObject({ code: 'ERR_BULK_PROTOCOL' });
    expect((err as Error).message).not.toContain('injected');
    await sleep(20);
    expect(o.sockets).toHaveLength(0);
  });

  it('an unsupported protocol → ERR_BULK_PROTOCOL', async () => {
    await expect(
      client().request({
        origin: new URL('ftp://127.0.0.1:21'),
        path: '/',
        method: 'GET',
        headers: {},
        signal: new AbortController().signal,
      }),
    ).rejects.toMatchObject({ code: 'ERR_BULK_PROTOCOL' });
  });
});

describe('the connect guard', () => {
  it('is asked about host and port before connecting, and when it refuses nothing is contacted', async () => {
    const o = await rawServer((s) => s.write(ok('')));
    const calls: Array<[string, number]> = [];
    const refused = Object.assign(new Error('restricted host'), { code: 'GW_FETCH_RESTRICTED_HOST' });
    const guard: ConnectGuard = {
      ...permissive,
      enabled: true,
      checkHost(host, port) {
        calls.push([host, port]);
        throw refused;
      },
    };
    await expect(get(client({ guard }), o)).rejects.toBe(refused);
    expect(calls).toEqual([['127.0.0.1', o.port]]);
    await sleep(20);
    expect(o.sockets).toHaveLength(0);
  });

  it("resolves names with the guard's lookup for the connection's port", async () => {
    const o = await rawServer((s) => s.write(ok('via lookup')));
    const ports: number[] = [];
    const names: string[] = [];
    const guard: ConnectGuard = {
      ...permissive,
      lookupFor(port): LookupFunction {
        ports.push(port);
        return (hostname, options, callback) => {
          names.push(hostname);
          dns.lookup('127.0.0.1', options, callback);
        };
      },
    };
    const res = await get(client({ guard }), { url: new URL(`http://localhost:${o.port}`) });
    expect(await text(res)).toBe('via lookup');
    expect(ports).toEqual([o.port]);
    expect(names).toEqual(['localhost']);
    expect(o.requests[0]).toContain(`\r\nhost: localhost:${o.port}\r\n`);
  });
});

describe('TLS', () => {
  let dir: string;
  let key: string;
  let cert: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'bulk-http-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-days',
        '1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    key = readFileSync(join(dir, 'key.pem'), 'utf8');
    cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function httpsOrigin(data: Buffer): Promise<{ url: URL; connections: () => number }> {
    let connections = 0;
    const server = createHttpsServer({ key, cert }, (req, res) => {
      if (req.url === '/chunked') {
        // No length: node:http sends it chunked.
        res.write(data.subarray(0, 1000));
        res.end(data.subarray(1000));
      } else {
        res.writeHead(200, { 'content-length': data.length });
        res.end(data);
      }
    });
    server.on('secureConnection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    );
    return { url: new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), connections: () => connections };
  }

  it('reads a body over https with the CA bundle, byte-exact, Content-Length and chunked, on one connection', async () => {
    const data = randomBytes(3 * MiB + 3);
    const o = await httpsOrigin(data);
    const c = client({ ca: cert });
    const first = await readAll((await get(c, o)).body);
    expect(sha(first.data)).toBe(sha(data));
    const res = await get(c, o, { path: '/chunked' });
    expect(res.headers['transfer-encoding']).toBe('chunked');
    expect(sha((await readAll(res.body)).data)).toBe(sha(data));
    expect(o.connections()).toBe(1);
  });

  it('without the CA bundle the self-signed certificate is refused', async () => {
    const o = await httpsOrigin(Buffer.from('secret'));
    const err = await get(client(), o).catch((e: unknown) => e as Error & { code?: string });
    expect(['DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN']).toContain((err as { code?: string }).code);
  });
});

describe('discardBody', () => {
  it('reads and drops a small body, and the connection is reused', async () => {
    const o = await rawServer((s, _h, conn, nth) =>
      s.write(nth === 0 ? ok(randomBytes(1000), 'Content-Type: text/html\r\n') : ok(`c${conn}-r${nth}`)),
    );
    const c = client();
    const res = await get(c, o);
    await discardBody(res.body);
    expect(res.body.readableEnded).toBe(true);
    expect(await text(await get(c, o))).toBe('c0-r1');
    expect(o.sockets).toHaveLength(1);
  });

  it('destroys a body larger than its limit, closing the connection', async () => {
    const o = await rawServer((s, _h, conn) => s.write(conn === 0 ? ok(randomBytes(4 * MiB)) : ok('next')));
    const c = client();
    const res = await get(c, o);
    await discardBody(res.body, 64 * 1024);
    expect(res.body.destroyed).toBe(true);
    await closed(o.sockets[0]!);
    expect(await text(await get(c, o))).toBe('next');
    expect(o.sockets).toHaveLength(2);
  });

  it('resolves when the body fails', async () => {
    const o = await rawServer((s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort'));
    const res = await get(client(), o);
    await expect(discardBody(res.body)).resolves.toBeUndefined();
  });
});
