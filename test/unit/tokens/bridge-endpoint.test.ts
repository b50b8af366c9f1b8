import { mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { request } from 'undici';
import type { JobManagerClient } from '../../../src/cluster/jobmanager-client';
import { errorMiddleware } from '../../../src/http/error-middleware';
import { createGatewayRoutes } from '../../../src/http/gateway-routes';
import { isLoopbackAddress } from '../../../src/net/loopback';
import type { TokenBridgeDeps } from '../../../src/http/token-bridge-route';
import { BridgeSecret } from '../../../src/tokens/receivers/bridge-secret';
import { captureLogger } from '../../helpers/token-fakes';

/** A non-loopback IPv4 address of this machine, if it has one. */
function externalIPv4(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

describe('GET /gateway/v1/tokens/bridge', () => {
  let dir: string;
  let server: Server;
  let port: number;
  let secret: BridgeSecret;
  let logs: ReturnType<typeof captureLogger>;
  const container = {
    version: 1 as const,
    tokens: { oauth2: Buffer.from('{"version":1,"jobs":{}}').toString('base64') },
    validUntil: 1_767_229_200_000,
  };

  const start = async (bridge: TokenBridgeDeps | undefined) => {
    const app = express();
    app.use(
      '/gateway/v1',
      createGatewayRoutes({ cluster: {} as JobManagerClient, isDraining: () => false, ...(bridge ? { tokenBridge: bridge } : {}) }),
    );
    app.use(errorMiddleware(logs.log));
    server = createServer(app);
    // All interfaces, so that a request through a non-loopback address can be made.
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', () => resolve()));
    port = (server.address() as AddressInfo).port;
  };
  const get = async (host: string, authorization?: string) => {
    const res = await request(`http://${host}:${port}/gateway/v1/tokens/bridge`, { headers: authorization ? { authorization } : {} });
    return { status: res.statusCode, headers: res.headers, body: (await res.body.json()) as Record<string, unknown> };
  };
  const secretValue = () => readFileSync(join(dir, 'bridge', 'secret'), 'utf8').trim();

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-bridge-endpoint-'));
    logs = captureLogger();
    secret = BridgeSecret.loadOrCreate(join(dir, 'bridge', 'secret'), logs.log);
  });
  afterEach(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a loopback client with the bridge secret: the container, not cacheable, no CORS header', async () => {
    await start({ secret, container: () => container });
    const r = await get('127.0.0.1', `Bearer ${secretValue()}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual(container);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
  });

  it("answers 401 in Flink's envelope without the secret or with a wrong one", async () => {
    await start({ secret, container: () => container });
    for (const auth of [undefined, 'Bearer wrong-secret-value', `Basic ${secretValue()}`, `Bearer ${secretValue()}x`]) {
      const r = await get('127.0.0.1', auth);
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Bearer realm="flink-jar-gateway-token-bridge"');
      expect(r.body).toEqual({ errors: [expect.stringMatching(/^GW_TOKENS_BRIDGE_UNAUTHORIZED: .*gateway\.tokens\.bridge-secret-file/)] });
    }
  });

  const external = externalIPv4();
  (external ? it : it.skip)(
    `answers 403 to a client that is not on loopback, even with the secret (via ${external ?? 'no external interface'})`,
    async () => {
      await start({ secret, container: () => container });
      const r = await get(external!, `Bearer ${secretValue()}`);
      expect(r.status).toBe(403);
      expect(r.body).toEqual({
        errors: [
          `GW_TOKENS_BRIDGE_FORBIDDEN: The token bridge answers loopback clients only, and this request came from ${external}; run Flink's JobManager next to the gateway and point security.delegation.token.provider.gateway.url at http://127.0.0.1:<gateway port>.`,
        ],
      });
    },
  );

  it('is 404 when the bridge is disabled', async () => {
    await start(undefined);
    const r = await get('127.0.0.1', `Bearer ${secretValue()}`);
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ errors: ['GW_ROUTE_NOT_FOUND: Not found: /gateway/v1/tokens/bridge'] });
  });

  it('never logs the secret or the container', async () => {
    await start({ secret, container: () => container });
    await get('127.0.0.1', `Bearer ${secretValue()}`);
    await get('127.0.0.1', 'Bearer wrong-secret-value');
    const text = JSON.stringify(logs.lines);
    expect(text).not.toContain(secretValue());
    expect(text).not.toContain('wrong-secret-value');
    expect(text).not.toContain(container.tokens.oauth2);
  });

  it('recognises loopback peers, also IPv4-mapped', () => {
    for (const a of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1'])
      expect({ a, loopback: isLoopbackAddress(a) }).toEqual({ a, loopback: true });
    for (const a of ['10.0.0.1', '::ffff:10.0.0.1', '0.0.0.0', '::', '1127.0.0.1', undefined])
      expect({ a, loopback: isLoopbackAddress(a) }).toEqual({ a, loopback: false });
  });
});

describe('the bridge secret file (gateway.tokens.bridge-secret-file)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-bridge-secret-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is created when missing: 32 random bytes, base64url, mode 0600 in a 0700 directory; the value is never logged', () => {
    const logs = captureLogger();
    const path = join(dir, 'sub', 'secret');
    const s = BridgeSecret.loadOrCreate(path, logs.log);
    const value = readFileSync(path, 'utf8').trim();
    expect(value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'sub')).mode & 0o777).toBe(0o700);
    expect(s.matches(value)).toBe(true);
    expect(s.matches(`${value}x`)).toBe(false);
    expect(JSON.stringify(logs.lines)).not.toContain(value);
    // Loading it again keeps the value.
    BridgeSecret.loadOrCreate(path, logs.log);
    expect(readFileSync(path, 'utf8').trim()).toBe(value);
  });

  it('is re-read when it is replaced (rotation), and warns when others may read it', () => {
    const logs = captureLogger();
    const path = join(dir, 'secret');
    writeFileSync(path, 'first-secret-0123456789\n', { mode: 0o644 });
    const s = BridgeSecret.loadOrCreate(path, logs.log);
    expect(logs.messages('warn')).toEqual([
      'the token bridge secret file is readable by group or others; restrict it to its owner (chmod 600)',
    ]);
    expect(s.matches('first-secret-0123456789')).toBe(true);
    writeFileSync(path, 'second-secret-0123456789-longer\n');
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect(s.matches('first-secret-0123456789')).toBe(false);
    expect(s.matches('second-secret-0123456789-longer')).toBe(true);
    // A broken replacement keeps the previous secret (and says so, without the content).
    writeFileSync(path, '\n');
    utimesSync(path, new Date(), new Date(Date.now() + 10_000));
    expect(s.matches('second-secret-0123456789-longer')).toBe(true);
    expect(logs.messages('error')).toHaveLength(1);
  });

  it('refuses to start with an unusable secret file', () => {
    const path = join(dir, 'secret');
    writeFileSync(path, 'short\n', { mode: 0o600 });
    expect(() => BridgeSecret.loadOrCreate(path, captureLogger().log)).toThrow(/at least 16 printable ASCII characters/);
  });
});
