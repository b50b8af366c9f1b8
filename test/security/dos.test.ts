// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, type TestGateway, writeTokensFile } from '../helpers/gateway';
import { startOrigin, type Origin } from '../helpers/origin';

/**
 * A class of hole (ADR 0009): what a client without credentials (or with them) can
 * hold. Slow headers, dripping bodies, bodies on GET, floods of the open GET /config route and
 * floods of slow pass-through calls must not take the sockets, the JobManager connections or the
 * readiness of everyone else. Bounded: at most 80 loopback connections per case.
 *
 * No case asserts how fast anything was: "unaffected" is shown by order. The admin call and readiness
 * are answered while the held or stalled requests are still held, and a connection counts as cut only
 * when the server closed it while the client was still sending. The waits below are liveness bounds
 * (how long before a missing answer counts as never), generous so that a loaded machine does not fail them.
 */
const NEVER_MS = 30_000;

interface Held {
  socket: Socket;
  data: () => string;
  closed: Promise<number>;
}

/** Opens a raw connection, writes `head`, and reports what comes back and when the server closes it. */
function hold(port: number, head: string): Held {
  const socket = connect(port, '127.0.0.1');
  let data = '';
  const opened = Date.now();
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => {
    data += d;
  });
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
  socket.write(head, 'latin1');
  return { socket, data: () => data, closed };
}

/** Resolves once the server has closed the connection; rejects if it never does (see NEVER_MS). */
function closedByServer(h: Held): Promise<number> {
  return Promise.race([
    h.closed,
    new Promise<number>((_, reject) =>
      setTimeout(
        () => reject(new Error(`connection still open after ${NEVER_MS} ms; got ${JSON.stringify(h.data().slice(0, 120))}`)),
        NEVER_MS,
      ),
    ),
  ]);
}

async function answer(url: string, headers: Record<string, string> = {}): Promise<{ status: number }> {
  const r = await fetch(url, { headers, signal: AbortSignal.timeout(NEVER_MS) });
  await r.arrayBuffer();
  return { status: r.status };
}

describe('no client can hold what others need', () => {
  let jm: Origin;
  let gw: TestGateway;
  let port: number;
  let dir: string;
  let stall = false;
  const stalled: (() => void)[] = [];
  let configCalls = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-dos-'));
    writeTokensFile(join(dir, 'tokens'), { admin: 'tok-admin' });
    jm = await startOrigin((req, res) => {
      if (req.url === '/config') configCalls++;
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      // /config and /slow stall while `stall` is set (readiness asks /v1/config: never stalled).
      if (stall && (req.url === '/config' || req.url?.startsWith('/slow'))) stalled.push(answer);
      else answer();
    });
    gw = await startGateway(jm.url, {
      'gateway.auth.tokens-file': join(dir, 'tokens'),
      'gateway.http.headers-timeout': '1 s',
      'gateway.http.request-timeout': '3 s',
      'gateway.http.max-anonymous-requests': '8',
    });
    port = Number(new URL(gw.url).port);
  });
  afterEach(() => {
    stall = false;
    for (const a of stalled.splice(0)) a();
  });
  afterAll(async () => {
    await gw.close();
    await jm.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('70 anonymous GET /config with a huge dripping body: each refused at once and closed; others unaffected', async () => {
    const held = Array.from({ length: 70 }, () => hold(port, 'GET /config HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\nx'));
    const drip = setInterval(() => {
      for (const h of held) if (!h.socket.destroyed) h.socket.write('x');
    }, 100);
    try {
      const admin = await answer(`${gw.url}/v1/jobs/overview`, { authorization: 'Bearer tok-admin' });
      const ready = await answer(`${gw.url}/gateway/v1/ready`);
      await Promise.all(held.map((h) => closedByServer(h)));
      expect({ admin: admin.status, ready: ready.status }).toEqual({ admin: 200, ready: 200 });
      expect(held.every((h) => /^HTTP\/1\.1 400/.test(h.data()) && h.data().includes('GW_REQUEST_MALFORMED'))).toBe(true);
    } finally {
      clearInterval(drip);
      for (const h of held) h.socket.destroy();
    }
  });

  it('a GET with a small dripping body is answered without waiting for it, then closed', async () => {
    const h = hold(port, 'GET /config HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{');
    const drip = setInterval(() => h.socket.write(' '), 200);
    try {
      await closedByServer(h);
      expect(h.data()).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      clearInterval(drip);
      h.socket.destroy();
    }
  });

  it('slow headers are cut after gateway.http.headers-timeout; a dripping body after gateway.http.request-timeout', async () => {
    const headers = hold(port, 'GET /config HTTP/1.1\r\nHost: x\r\n');
    const body = hold(
      port,
      'POST /v1/jobs/x/stop HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-admin\r\nContent-Length: 100000\r\n\r\n{',
    );
    const drip = setInterval(() => {
      headers.socket.write('X-A: b\r\n');
      body.socket.write(' ');
    }, 200);
    try {
      // Both clients drip until the server cuts them: closed while still sending, so by the timeouts.
      await closedByServer(headers);
      await closedByServer(body);
    } finally {
      clearInterval(drip);
      headers.socket.destroy();
      body.socket.destroy();
    }
  });

  it('anonymous GET /config beyond gateway.http.max-anonymous-requests gets 503 + Retry-After; authenticated calls go on', async () => {
    stall = true;
    configCalls = 0;
    const anonymous = Array.from({ length: 30 }, () =>
      fetch(`${gw.url}/config`, { signal: AbortSignal.timeout(10_000) }).then(async (r) => ({
        status: r.status,
        retry: r.headers.get('retry-after'),
        body: await r.text(),
      })),
    );
    await new Promise((r) => setTimeout(r, 500));
    // Answered while the stalled anonymous calls are still held: it does not queue behind them.
    const admin = await answer(`${gw.url}/v1/overview`, { authorization: 'Bearer tok-admin' });
    const heldWhileAnswered = stalled.length;
    stall = false;
    for (const a of stalled.splice(0)) a();
    const results = await Promise.all(anonymous);
    const busy = results.filter((r) => r.status === 503);
    expect(configCalls).toBeLessThanOrEqual(8);
    expect(results.filter((r) => r.status === 200)).toHaveLength(8);
    expect(busy).toHaveLength(22);
    expect(busy.every((r) => r.retry === '1' && r.body.includes('GW_GATEWAY_BUSY'))).toBe(true);
    expect(admin).toMatchObject({ status: 200 });
    expect(heldWhileAnswered).toBeGreaterThan(0);
  });

  it("a flood of slow pass-through calls fills only the pass-through pool: readiness and the gateway's own calls still answer", async () => {
    stall = true;
    const slow = Array.from({ length: 70 }, (_, i) =>
      fetch(`${gw.url}/slow/${i}`, { headers: { authorization: 'Bearer tok-admin' }, signal: AbortSignal.timeout(12_000) }).then(
        (r) => r.status,
        () => 0,
      ),
    );
    await new Promise((r) => setTimeout(r, 800));
    // Answered while every slow call is still held by the JobManager: the pools are separate.
    const ready = await answer(`${gw.url}/gateway/v1/ready`);
    const heldWhileAnswered = stalled.length;
    stall = false;
    for (const a of stalled.splice(0)) a();
    await Promise.all(slow);
    expect(ready.status).toBe(200);
    expect(heldWhileAnswered).toBeGreaterThan(0);
  });
});
