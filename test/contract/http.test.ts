import { createHash, randomBytes } from 'node:crypto';
import pino from 'pino';
import { createHttpFileSystem, httpPlugin } from '../../fs-plugins/http';
import { createConnectGuard } from '../../src/net/connect-guard';
import type { FileSystem, PluginContext } from '../../src/plugin-kit/fs-plugin';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { startForwardProxy, startHttpOrigin, type ForwardProxy, type HttpOrigin } from '../servers/http-origin';
import { makeSelfSignedCert, type TlsMaterial } from '../servers/tls';
import { fsPluginContract } from './fs-plugin-contract';
import { readAll } from './plugin-fixtures';

const GOOD_TOKEN = `good-${randomBytes(12).toString('hex')}`;
const WRONG_TOKEN = `wrong-${randomBytes(12).toString('hex')}`;
const API_KEY = `key-${randomBytes(12).toString('hex')}`;
/** Stands in for a presigned URL's signature: a credential in the query string. */
const SIGNATURE = `sig${randomBytes(12).toString('hex')}`;
const SECRETS = [GOOD_TOKEN, WRONG_TOKEN, API_KEY, SIGNATURE];
const LARGE_SIZE = 64 * 1024 * 1024;

interface BuildOptions {
  /** `host:port` entries exempt from the restricted-host guard. */
  allowed: string[];
  /** The CA bundle (`ctx.ca`); omit to trust only the default store. */
  ca?: string;
  /** Proxy environment; without it the plugin is built exactly as the gateway builds it (`create`). */
  env?: NodeJS.ProcessEnv;
  /** `gateway.artifacts.disallow-restricted-hosts`; default true. */
  guardEnabled?: boolean;
}

const opened: FileSystem[] = [];

/** An HTTP FileSystem built the gateway's way: plugin options → registry → create(ctx). */
function httpFs(settings: Record<string, string>, opts: BuildOptions): FileSystem {
  const raw = new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));
  const ctx: PluginContext = {
    config: new OptionsRegistry(httpPlugin.options, httpPlugin.rules).resolve(raw),
    log: pino({ level: 'silent' }),
    guard: createConnectGuard({ enabled: opts.guardEnabled ?? true, allowed: opts.allowed }),
    ca: opts.ca,
  };
  const fs = opts.env === undefined ? httpPlugin.create(ctx) : createHttpFileSystem(ctx, opts.env);
  opened.push(fs);
  return fs;
}

const bearer = (token: string) => ({
  'user.artifacts.http-headers': `Authorization:Bearer ${token}`,
  'gateway.artifacts.http-headers.hosts': '127.0.0.1;localhost',
});

/** Awaits a failure and checks its code, and that no secret (header value, query signature) leaks. */
async function failure(p: Promise<unknown>, code: string): Promise<Error> {
  const err = await p.then(
    () => {
      throw new Error(`resolved; expected ${code}`);
    },
    (e: unknown) => e as Error,
  );
  expect({ code: (err as { code?: string }).code, message: err.message }).toMatchObject({ code });
  const text = `${err.message} ${JSON.stringify(err)}`;
  for (const s of SECRETS) expect(text).not.toContain(s);
  return err;
}

let cert: TlsMaterial;
const small = randomBytes(20_000);
const large = randomBytes(LARGE_SIZE);
const largeSha = createHash('sha256').update(large).digest('hex');
const files = { '/small.jar': small, '/large.jar': large };

beforeAll(() => {
  cert = makeSelfSignedCert();
});

afterAll(async () => {
  await Promise.all(opened.map((fs) => fs.close()));
});

fsPluginContract('http', async () => {
  const origin = await startHttpOrigin({ tls: cert, files, bearerToken: GOOD_TOKEN });
  const exempt = [`127.0.0.1:${origin.port}`];
  return {
    fs: httpFs(bearer(GOOD_TOKEN), { allowed: exempt, ca: cert.cert }),
    wrongCredentialsFs: httpFs(bearer(WRONG_TOKEN), { allowed: exempt, ca: cert.cert }),
    guardedFs: httpFs(bearer(GOOD_TOKEN), { allowed: [], ca: cert.cert }),
    small: { uri: new URL(`${origin.url}/auth/small.jar?X-Amz-Signature=${SIGNATURE}`), content: small },
    large: { uri: new URL(`${origin.url}/auth/large.jar`), size: LARGE_SIZE, sha256: largeSha },
    missing: new URL(`${origin.url}/auth/missing.jar?X-Amz-Signature=${SIGNATURE}`),
    secrets: SECRETS,
    close: () => origin.stop(),
  };
});

describe('http plugin: schemes, redirects, headers, guard, TLS, timeouts', () => {
  let tlsOrigin: HttpOrigin; // https, exempt from the guard
  let plainOrigin: HttpOrigin; // http, exempt from the guard
  let forbidden: HttpOrigin; // http, NOT exempt
  let exempt: string[];
  const signal = () => AbortSignal.timeout(30_000);

  beforeAll(async () => {
    tlsOrigin = await startHttpOrigin({ tls: cert, files, bearerToken: GOOD_TOKEN });
    plainOrigin = await startHttpOrigin({ files, bearerToken: GOOD_TOKEN });
    forbidden = await startHttpOrigin({ files });
    exempt = [`127.0.0.1:${tlsOrigin.port}`, `127.0.0.1:${plainOrigin.port}`];
  });
  afterAll(async () => {
    await Promise.all([tlsOrigin.stop(), plainOrigin.stop(), forbidden.stop()]);
  });

  const fsWith = (settings: Record<string, string> = {}, allowed = exempt) => httpFs(settings, { allowed, ca: cert.cert });

  it('refuses http:// unless user.artifacts.raw-http-enabled is true', async () => {
    const uri = new URL(`${plainOrigin.url}/small.jar?sig=${SIGNATURE}`);
    const before = plainOrigin.requests.length;
    const err = await failure(fsWith().open(uri, { signal: signal() }), 'GW_FETCH_SCHEME_UNSUPPORTED');
    expect(err.message).toContain('set user.artifacts.raw-http-enabled: true to allow plain http');
    expect(plainOrigin.requests.length).toBe(before);

    const { stream } = await fsWith({ 'user.artifacts.raw-http-enabled': 'true' }).open(uri, { signal: signal() });
    expect((await readAll(stream)).equals(small)).toBe(true);
  });

  it('follows up to gateway.artifacts.http.max-redirects same-origin redirects, with the headers on every hop', async () => {
    const fs = fsWith({ ...bearer(GOOD_TOKEN), 'gateway.artifacts.http.max-redirects': '5' });
    const { stream } = await fs.open(new URL(`${tlsOrigin.url}/redirect/5/auth/small.jar`), { signal: signal() });
    expect((await readAll(stream)).equals(small)).toBe(true);
    const hops = tlsOrigin.requests.filter((r) => /^\/redirect\/\d\/auth\/small\.jar$/.test(r.path));
    expect(hops.map((r) => r.path).slice(-5)).toEqual([5, 4, 3, 2, 1].map((n) => `/redirect/${n}/auth/small.jar`));
    for (const hop of hops.slice(-5)) expect(hop.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`);
  });

  it('follows 301, 303, 307 and 308 with relative Locations', async () => {
    const fs = fsWith();
    for (const code of [301, 303, 307, 308]) {
      const { stream } = await fs.open(new URL(`${tlsOrigin.url}/redirect/2/small.jar?code=${code}`), { signal: signal() });
      expect((await readAll(stream)).equals(small)).toBe(true);
    }
    expect((await fs.stat(new URL(`${tlsOrigin.url}/redirect/2/small.jar?code=307`), signal())).size).toBe(small.length);
  });

  it('refuses one redirect more than the limit with GW_FETCH_URI_INVALID', async () => {
    const err = await failure(
      fsWith().open(new URL(`${tlsOrigin.url}/redirect/6/small.jar?sig=${SIGNATURE}`), { signal: signal() }),
      'GW_FETCH_URI_INVALID',
    );
    expect(err.message).toContain('gateway.artifacts.http.max-redirects');
    const none = fsWith({ 'gateway.artifacts.http.max-redirects': '0' });
    await failure(none.stat(new URL(`${tlsOrigin.url}/redirect/1/small.jar`), signal()), 'GW_FETCH_URI_INVALID');
  });

  it('sends a User-Agent (flink-jar-gateway/<version>) unless one is configured (fidelity item 7)', async () => {
    const start = tlsOrigin.requests.length;
    await fsWith({}).stat(new URL(`${tlsOrigin.url}/small.jar`), signal());
    expect(tlsOrigin.requests.slice(start).map((r) => r.headers['user-agent'])).toEqual([
      expect.stringMatching(/^flink-jar-gateway\/\d+\.\d+\.\d+/),
    ]);
    const mine = fsWith({ 'user.artifacts.http-headers': 'User-Agent:ci-fetcher/1', 'gateway.artifacts.http-headers.hosts': '127.0.0.1' });
    const again = tlsOrigin.requests.length;
    await mine.stat(new URL(`${tlsOrigin.url}/small.jar`), signal());
    expect(tlsOrigin.requests.slice(again).map((r) => r.headers['user-agent'])).toEqual(['ci-fetcher/1']);
  });

  it('sends no headers to a host that is not listed in gateway.artifacts.http-headers.hosts', async () => {
    const fs = fsWith({
      'user.artifacts.http-headers': `Authorization:Bearer ${GOOD_TOKEN}`,
      'gateway.artifacts.http-headers.hosts': 'repo.example.com',
    });
    const start = tlsOrigin.requests.length;
    await failure(fs.stat(new URL(`${tlsOrigin.url}/auth/small.jar`), signal()), 'GW_FETCH_DENIED');
    expect(tlsOrigin.requests.slice(start).every((r) => r.headers.authorization === undefined)).toBe(true);
  });

  it('sends the configured headers to the original origin only, never after a cross-origin redirect', async () => {
    const fs = fsWith(
      {
        'user.artifacts.http-headers': `Authorization:Bearer ${GOOD_TOKEN},X-Api-Key:${API_KEY}`,
        'gateway.artifacts.http-headers.hosts': '127.0.0.1;localhost',
      },
      [...exempt, `localhost:${tlsOrigin.port}`],
    );
    const target = `${tlsOrigin.altUrl}/auth/small.jar`; // same server, other origin (localhost vs 127.0.0.1)
    const start = tlsOrigin.requests.length;
    await failure(fs.open(new URL(`${tlsOrigin.url}/to?url=${encodeURIComponent(target)}`), { signal: signal() }), 'GW_FETCH_DENIED');
    const [first, second] = tlsOrigin.requests.slice(start);
    expect(first).toMatchObject({
      path: '/to',
      headers: { host: `127.0.0.1:${tlsOrigin.port}`, authorization: `Bearer ${GOOD_TOKEN}`, 'x-api-key': API_KEY },
    });
    expect(second).toMatchObject({ path: '/auth/small.jar', headers: { host: `localhost:${tlsOrigin.port}` } });
    expect(second!.headers.authorization).toBeUndefined();
    expect(second!.headers['x-api-key']).toBeUndefined();

    // Back on the original origin (A → B → A) the headers are sent again: it is the origin they were configured for.
    const back = `${tlsOrigin.altUrl}/to?url=${encodeURIComponent(`${tlsOrigin.url}/auth/small.jar`)}`;
    const { stream } = await fs.open(new URL(`${tlsOrigin.url}/to?url=${encodeURIComponent(back)}`), { signal: signal() });
    expect((await readAll(stream)).equals(small)).toBe(true);
  });

  it('refuses a redirect to a restricted, non-exempt host:port although the first hop was allowed', async () => {
    const fs = fsWith({ 'user.artifacts.raw-http-enabled': 'true' });
    for (const target of [`${forbidden.url}/small.jar`, `${forbidden.altUrl}/small.jar`, `https://127.0.0.1:${forbidden.port}/small.jar`]) {
      const uri = new URL(`${tlsOrigin.url}/to?url=${encodeURIComponent(`${target}?sig=${SIGNATURE}`)}`);
      await failure(fs.open(uri, { signal: signal() }), 'GW_FETCH_RESTRICTED_HOST');
      await failure(fs.stat(uri, signal()), 'GW_FETCH_RESTRICTED_HOST');
    }
    expect(forbidden.requests).toHaveLength(0);
  });

  it('refuses a redirect to http:// unless raw http is enabled, and to other schemes always', async () => {
    const toPlain = new URL(`${tlsOrigin.url}/to?url=${encodeURIComponent(`${plainOrigin.url}/small.jar`)}`);
    const before = plainOrigin.requests.length;
    const err = await failure(fsWith().open(toPlain, { signal: signal() }), 'GW_FETCH_SCHEME_UNSUPPORTED');
    expect(err.message).toContain('redirected to plain http');
    expect(plainOrigin.requests.length).toBe(before);
    const { stream } = await fsWith({ 'user.artifacts.raw-http-enabled': 'true' }).open(toPlain, { signal: signal() });
    expect((await readAll(stream)).equals(small)).toBe(true);

    const toFile = new URL(`${tlsOrigin.url}/to?url=${encodeURIComponent('file:///etc/passwd')}`);
    await failure(fsWith({ 'user.artifacts.raw-http-enabled': 'true' }).open(toFile, { signal: signal() }), 'GW_FETCH_SCHEME_UNSUPPORTED');
  });

  it('a self-signed certificate without the CA → GW_FETCH_UNAVAILABLE naming the TLS failure', async () => {
    const fs = httpFs({}, { allowed: exempt }); // no ctx.ca
    const err = await failure(
      fs.open(new URL(`${tlsOrigin.url}/small.jar?sig=${SIGNATURE}`), { signal: signal() }),
      'GW_FETCH_UNAVAILABLE',
    );
    expect(err.message).toMatch(/TLS: (DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)/);
  });

  it('a body that stalls fails after gateway.artifacts.http.read-timeout, and so do missing headers', async () => {
    // The origin never answers: only the read timeout can end these, and its message names it.
    const fs = fsWith({ 'gateway.artifacts.http.read-timeout': '300 ms' });
    const { stream } = await fs.open(new URL(`${tlsOrigin.url}/stall?sig=${SIGNATURE}`), { signal: signal() });
    const err = await failure(readAll(stream), 'GW_FETCH_UNAVAILABLE');
    expect(err.message).toContain('gateway.artifacts.http.read-timeout');

    const headersErr = await failure(fs.open(new URL(`${tlsOrigin.url}/stall-headers`), { signal: signal() }), 'GW_FETCH_UNAVAILABLE');
    expect(headersErr.message).toContain('gateway.artifacts.http.read-timeout');
  });

  it('stat: etag without quotes, lastModified, and a one-byte ranged GET where HEAD is refused', async () => {
    const fs = fsWith();
    const st = await fs.stat(new URL(`${tlsOrigin.url}/small.jar`), signal());
    expect(st).toEqual({
      size: small.length,
      etag: createHash('sha1').update(small).digest('hex'),
      lastModified: Date.parse('2024-05-01T12:00:00Z'),
      pinnedRanges: true, // Accept-Ranges: bytes and a strong ETag
    });
    expect((await fs.stat(new URL(`${tlsOrigin.url}/weak/small.jar`), signal())).pinnedRanges).toBeUndefined();
    const start = tlsOrigin.requests.length;
    expect(await fs.stat(new URL(`${tlsOrigin.url}/nohead/small.jar`), signal())).toEqual(st);
    expect(tlsOrigin.requests.slice(start).map((r) => [r.method, r.headers.range])).toEqual([
      ['HEAD', undefined],
      ['GET', 'bytes=0-0'],
    ]);
  });

  it('open reports the whole size for a ranged read and maps an unsatisfiable range to GW_FETCH_UNAVAILABLE', async () => {
    const fs = fsWith();
    const { stream, stat } = await fs.open(new URL(`${tlsOrigin.url}/small.jar`), { signal: signal(), range: { start: 100, end: 199 } });
    expect((await readAll(stream)).equals(small.subarray(100, 200))).toBe(true);
    expect(stat.size).toBe(small.length);
    await failure(
      fs.open(new URL(`${tlsOrigin.url}/small.jar`), { signal: signal(), range: { start: small.length, end: small.length + 9 } }),
      'GW_FETCH_UNAVAILABLE',
    );
  });

  it('refuses credentials in the URI instead of dropping them silently', async () => {
    const uri = new URL(`https://user:${GOOD_TOKEN}@127.0.0.1:${tlsOrigin.port}/small.jar`);
    await failure(fsWith().stat(uri, signal()), 'GW_FETCH_URI_INVALID');
  });

  it("an abort before the response passes the caller's reason through", async () => {
    const ac = new AbortController();
    const reason = new Error('caller gave up');
    const p = fsWith().open(new URL(`${tlsOrigin.url}/stall-headers`), { signal: ac.signal });
    setTimeout(() => ac.abort(reason), 50);
    await expect(p).rejects.toBe(reason);
  });

  describe('through a proxy (HTTPS_PROXY / HTTP_PROXY / NO_PROXY)', () => {
    let proxy: ForwardProxy;
    beforeAll(async () => {
      proxy = await startForwardProxy({ refuse: (target) => target.startsWith('blocked.invalid:') });
    });
    afterAll(async () => proxy.stop());

    const viaProxy = (env: NodeJS.ProcessEnv, settings: Record<string, string> = {}, allowed = exempt) =>
      httpFs(settings, { allowed, ca: cert.cert, env });

    it('tunnels https:// with CONNECT; the proxy itself is not subject to the guard', async () => {
      const seen = proxy.seen.length;
      const { stream } = await viaProxy({ HTTPS_PROXY: proxy.url }).open(new URL(`${tlsOrigin.url}/small.jar`), { signal: signal() });
      expect((await readAll(stream)).equals(small)).toBe(true);
      expect(proxy.seen.slice(seen)).toEqual([`127.0.0.1:${tlsOrigin.port}`]);
    });

    it('checks the target against the guard before asking the proxy (IP literal and host name)', async () => {
      const seen = proxy.seen.length;
      const fs = viaProxy({ HTTPS_PROXY: proxy.url }, {}, []);
      await failure(fs.open(new URL(`${tlsOrigin.url}/small.jar`), { signal: signal() }), 'GW_FETCH_RESTRICTED_HOST');
      await failure(fs.open(new URL(`${tlsOrigin.altUrl}/small.jar`), { signal: signal() }), 'GW_FETCH_RESTRICTED_HOST');
      // ...and on every redirect hop: the allowed first hop is tunnelled, the non-exempt second is not requested.
      const redirect = new URL(`${tlsOrigin.url}/to?url=${encodeURIComponent(`${forbidden.altUrl}/small.jar`)}`);
      const both = viaProxy({ HTTPS_PROXY: proxy.url, HTTP_PROXY: proxy.url }, { 'user.artifacts.raw-http-enabled': 'true' });
      await failure(both.open(redirect, { signal: signal() }), 'GW_FETCH_RESTRICTED_HOST');
      expect(proxy.seen.slice(seen)).toEqual([`127.0.0.1:${tlsOrigin.port}`]);
      expect(forbidden.requests).toHaveLength(0);
    });

    it('an exempt host name passes the pre-check and is tunnelled', async () => {
      const fs = viaProxy({ HTTPS_PROXY: proxy.url }, {}, [`localhost:${tlsOrigin.port}`]);
      const { stream } = await fs.open(new URL(`${tlsOrigin.altUrl}/small.jar`), { signal: signal() });
      expect((await readAll(stream)).equals(small)).toBe(true);
    });

    it('a target the gateway cannot resolve is refused while the guard is on, and left to the proxy when it is off', async () => {
      const uri = new URL(`https://no-such-host.invalid/app.jar?sig=${SIGNATURE}`);
      const seen = proxy.seen.length;
      const err = await failure(viaProxy({ HTTPS_PROXY: proxy.url }).open(uri, { signal: signal() }), 'GW_FETCH_UNAVAILABLE');
      expect(err.message).toContain('cannot resolve no-such-host.invalid');
      expect(proxy.seen.length).toBe(seen);

      const unguarded = httpFs({}, { allowed: [], ca: cert.cert, env: { HTTPS_PROXY: proxy.url }, guardEnabled: false });
      await failure(unguarded.open(uri, { signal: signal() }), 'GW_FETCH_UNAVAILABLE'); // the proxy cannot reach it either
      expect(proxy.seen.slice(seen)).toEqual(['no-such-host.invalid:443']);
    });

    it("a tunnel the proxy refuses → GW_FETCH_UNAVAILABLE naming the proxy's status", async () => {
      const fs = httpFs({}, { allowed: [], ca: cert.cert, env: { HTTPS_PROXY: proxy.url }, guardEnabled: false });
      const err = await failure(
        fs.open(new URL(`https://blocked.invalid/app.jar?sig=${SIGNATURE}`), { signal: signal() }),
        'GW_FETCH_UNAVAILABLE',
      );
      expect(err.message).toContain('the proxy refused the tunnel with HTTP 403');
    });

    it('forwards http:// through HTTP_PROXY, and NO_PROXY bypasses the proxy', async () => {
      const seen = proxy.seen.length;
      const raw = { 'user.artifacts.raw-http-enabled': 'true' };
      const forwarded = await viaProxy({ HTTP_PROXY: proxy.url }, raw).open(new URL(`${plainOrigin.url}/small.jar`), { signal: signal() });
      expect((await readAll(forwarded.stream)).equals(small)).toBe(true);
      expect(proxy.seen.slice(seen)).toEqual([`${plainOrigin.url}/small.jar`]);

      const direct = await viaProxy({ HTTPS_PROXY: proxy.url, NO_PROXY: 'localhost,127.0.0.1' }).open(
        new URL(`${tlsOrigin.url}/small.jar`),
        { signal: signal() },
      );
      expect((await readAll(direct.stream)).equals(small)).toBe(true);
      expect(proxy.seen.length).toBe(seen + 1);
    });
  });
});
