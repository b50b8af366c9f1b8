// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { azurePlugin } from '../../fs-plugins/azure';
import { filePlugin } from '../../fs-plugins/file';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { ArtifactFetcher } from '../../src/artifacts/artifact-fetcher';
import { createConnectGuard, isRestrictedAddress } from '../../src/net/connect-guard';
import { fetchError } from '../../src/plugin-kit/fetch-error';
import { FetchProgress } from '../../src/artifacts/fetch-progress';
import { JarCache } from '../../src/artifacts/jar-cache';
import { PluginRegistry } from '../../src/artifacts/plugin-registry';
import { FetchQueue } from '../../src/artifacts/fetch-queue';
import { createRegistry } from '../../src/composition';
import type { RawEntry } from '../../src/config/registry';
import { json, newJobId, uploadBytes } from '../helpers/flink';
import { startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { startDnsServer, resolverFor, type DnsServer } from '../servers/dns-server';
import { startFakeJobManager, type FakeJobManager } from '../servers/fake-jobmanager';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';
import { startTrapListener, type TrapListener } from '../servers/trap-listener';
import { netnsAvailable, runNetnsProbe, type NetnsReport } from './netns-ssrf';

const JAR = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'a.txt': 'payload' });
const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
const HEADER_CANARY = `canary-header-${randomBytes(8).toString('hex')}`;

/** Totals printed at the end: every refused request must have left the traps untouched. */
const totals = { tried: 0, refused: 0, allowedControls: 0, leaked: 0 };

interface Case {
  name: string;
  uri: string;
  /** Acceptable GW_ codes (the request is refused before any restricted connection). */
  codes: string[];
}

/**
 * The restricted-address guard, proven at the listeners: node:http servers on 127.0.0.1, 127.0.0.2
 * and ::1 count every TCP connection they accept (and would serve a valid jar to whoever asks), and
 * every URI below, through every plugin and every owned route that fetches, must be refused with 0
 * connections there. Only `gateway.artifacts.restricted-hosts.allowed` entries are reachable.
 */
describe('SSRF guard: 0 connections reach a restricted address (host namespace, loopback only)', () => {
  let traps: { v4: TrapListener; v4b: TrapListener; v6: TrapListener };
  let origin: HttpOrigin;
  let s3Redirector: Server;
  let s3RedirectorPort: number;
  let jm: FakeJobManager;
  let gw: TestGateway;

  beforeAll(async () => {
    const [v4, v4b, v6] = await Promise.all([
      startTrapListener('127.0.0.1', JAR),
      startTrapListener('127.0.0.2', JAR),
      startTrapListener('::1', JAR),
    ]);
    traps = { v4, v4b, v6 };
    origin = await startHttpOrigin({ files: { '/app.jar': JAR } });
    // An exempt "S3 endpoint" whose every answer redirects to a trap: the SDK must not follow it.
    s3Redirector = createServer((_req, res) => res.writeHead(307, { location: `${traps.v4.url}/b/app.jar` }).end());
    await new Promise<void>((resolve) => s3Redirector.listen(0, '127.0.0.1', () => resolve()));
    s3RedirectorPort = (s3Redirector.address() as AddressInfo).port;
    jm = await startFakeJobManager();
    gw = await startGateway(
      jm.url,
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'https;http;s3;s3a;wasbs;file',
        'user.artifacts.raw-http-enabled': 'true',
        // The only reachable restricted host:ports: the origin (under two names) and the redirecting S3 stub.
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port};localhost:${origin.port};127.0.0.1:${s3RedirectorPort}`,
        'user.artifacts.http-headers': `Authorization:Bearer ${HEADER_CANARY}`,
        'gateway.artifacts.http-headers.hosts': '127.0.0.1;localhost',
        'gateway.artifacts.fetch-retries': '0',
        's3.access-key': 'AKIDSSRFTEST',
        's3.secret-key': 'ssrf-test-secret',
        's3.path.style.access': 'true',
        's3.endpoint': traps.v4.url,
        'fs.s3a.bucket.b-v6.endpoint': traps.v6.url,
        'fs.s3a.bucket.b-v4b.endpoint': traps.v4b.url,
        'fs.s3a.bucket.b-name.endpoint': `http://localhost:${traps.v4.port}`,
        'fs.s3a.bucket.b-decimal.endpoint': `http://2130706433:${traps.v4.port}`,
        'fs.s3a.bucket.b-mapped.endpoint': `http://[::ffff:127.0.0.1]:${traps.v4.port}`,
        'fs.s3a.bucket.b-redirect.endpoint': `http://127.0.0.1:${s3RedirectorPort}`,
        // Keys for every Azure account named below: without one the plugin would fall back to
        // DefaultAzureCredential, which probes the cloud metadata endpoint.
        'fs.azure.account.key.acct.blob.core.windows.net': randomBytes(32).toString('base64'),
        'fs.azure.account.endpoint.acct': `${traps.v4.url}/acct`,
        'fs.azure.account.key.acctname.blob.core.windows.net': randomBytes(32).toString('base64'),
        'fs.azure.account.endpoint.acctname': `http://localhost:${traps.v4.port}/acctname`,
        'fs.azure.account.key.acctsix.blob.core.windows.net': randomBytes(32).toString('base64'),
        'fs.azure.account.endpoint.acctsix': `${traps.v6.url}/acctsix`,
      },
      [httpPlugin, s3Plugin, azurePlugin, filePlugin],
    );
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await jm?.stop();
    await origin?.stop();
    await new Promise<void>((resolve) => (s3Redirector ? s3Redirector.close(() => resolve()) : resolve()));
    await Promise.all(Object.values(traps ?? {}).map((t) => t.stop()));
    process.stderr.write(
      `\nSSRF summary: requests tried ${totals.tried}, refused ${totals.refused}, allowed controls ${totals.allowedControls}, ` +
        `connections that reached a restricted listener ${totals.leaked} (must be 0)\n`,
    );
  });

  const leaked = () => traps.v4.accepted + traps.v4b.accepted + traps.v6.accepted;

  /** POST /jars/fetch, expecting a refusal with one of `codes`, and no new connection at any trap. */
  async function expectRefused(c: Case): Promise<void> {
    const before = leaked();
    const r = await json('POST', `${gw.url}/jars/fetch`, { uri: c.uri });
    totals.tried++;
    const message = String((r.body.errors as string[] | undefined)?.[0] ?? JSON.stringify(r.body));
    const after = leaked();
    totals.leaked += after - before;
    if (r.status >= 400) totals.refused++;
    expect({
      case: c.name,
      status: r.status >= 400 ? 'refused' : r.status,
      code: message.split(':')[0],
      connections: after - before,
    }).toEqual({
      case: c.name,
      status: 'refused',
      code: expect.stringMatching(new RegExp(`^(${c.codes.join('|')})$`)),
      connections: 0,
    });
  }

  const T = () => traps.v4.port;
  const T6 = () => traps.v6.port;
  const T2 = () => traps.v4b.port;
  const R = ['GW_FETCH_RESTRICTED_HOST'];

  const literals: [string, () => string][] = [
    ['IPv4 loopback', () => `http://127.0.0.1:${T()}/app.jar`],
    ['another loopback address (127.0.0.2)', () => `http://127.0.0.2:${T2()}/app.jar`],
    ['IPv6 loopback [::1]', () => `http://[::1]:${T6()}/app.jar`],
    ['IPv6 loopback, long form', () => `http://[0:0:0:0:0:0:0:1]:${T6()}/app.jar`],
    ['IPv6 unspecified [::] (connects to loopback)', () => `http://[::]:${T6()}/app.jar`],
    ['IPv4-mapped [::ffff:127.0.0.1]', () => `http://[::ffff:127.0.0.1]:${T()}/app.jar`],
    ['IPv4-mapped, hex [::ffff:7f00:1]', () => `http://[::ffff:7f00:1]:${T()}/app.jar`],
    ['IPv4-mapped, long form', () => `http://[0:0:0:0:0:ffff:127.0.0.1]:${T()}/app.jar`],
    ['6to4 embedding 127.0.0.1 [2002:7f00:1::]', () => `http://[2002:7f00:1::]:${T()}/app.jar`],
    ['6to4 embedding 127.0.0.2, long form', () => `http://[2002:7f00:0002:0:0:0:0:1]:${T2()}/app.jar`],
    ['6to4 embedding 169.254.169.254 [2002:a9fe:a9fe::]', () => `http://[2002:a9fe:a9fe::]:${T()}/app.jar`],
    ['Teredo, client 127.0.0.1 (inverted) [2001:0:808:808::80ff:fffe]', () => `http://[2001:0:808:808::80ff:fffe]:${T()}/app.jar`],
    ['Teredo, server 127.0.0.1 [2001:0:7f00:1::]', () => `http://[2001:0:7f00:1::]:${T()}/app.jar`],
    ['decimal 2130706433', () => `http://2130706433:${T()}/app.jar`],
    ['octal 0177.0.0.1', () => `http://0177.0.0.1:${T()}/app.jar`],
    ['short 127.1', () => `http://127.1:${T()}/app.jar`],
    ['hex 0x7f.1', () => `http://0x7f.1:${T()}/app.jar`],
    ['one octal number 017700000001', () => `http://017700000001:${T()}/app.jar`],
    ['trailing dot 127.0.0.1.', () => `http://127.0.0.1.:${T()}/app.jar`],
    ['unspecified 0.0.0.0 (connects to loopback)', () => `http://0.0.0.0:${T()}/app.jar`],
    ['0 (= 0.0.0.0)', () => `http://0:${T()}/app.jar`],
    ['short 127.0.1 on 127.0.0.2', () => `http://127.0.2:${T2()}/app.jar`],
    ['localhost (resolved by the system resolver)', () => `http://localhost:${T()}/app.jar`],
    ['localhost, upper case', () => `http://LOCALHOST:${T()}/app.jar`],
    ['scheme without slashes http:127.0.0.1', () => `http:127.0.0.1:${T()}/app.jar`],
    ['exempt host, other port (exemption is per host:port)', () => `http://127.0.0.1:${T()}/app.jar`],
  ];

  it.each(literals)('refuses %s', async (name, uri) => {
    await expectRefused({ name, uri: uri(), codes: R });
  });

  it('localhost with a trailing dot is refused or unresolvable, never connected', async () => {
    await expectRefused({
      name: 'localhost.',
      uri: `http://localhost.:${T()}/app.jar`,
      codes: ['GW_FETCH_RESTRICTED_HOST', 'GW_FETCH_UNAVAILABLE'],
    });
  });

  it.each([
    ['userinfo naming the exempt host', () => `http://127.0.0.1:${origin.port}@127.0.0.1:${T()}/app.jar`, ['GW_FETCH_URI_INVALID']],
    ['userinfo with a password', () => `http://user:pw@127.0.0.1:${origin.port}/app.jar`, ['GW_FETCH_URI_INVALID']],
    ['percent-encoded @ in the host', () => `http://exempt%40127.0.0.1:${T()}/app.jar`, ['GW_FETCH_URI_INVALID']],
    ['backslash before @ (WHATWG: a path separator)', () => `http://127.0.0.1:${T()}\\@127.0.0.1:${origin.port}/app.jar`, R],
    ['zone id in an IPv6 literal', () => `http://[::1%25lo]:${T6()}/app.jar`, ['GW_FETCH_URI_INVALID']],
  ] as [string, () => string, string[]][])('refuses a userinfo / parser trick: %s', async (name, uri, codes) => {
    await expectRefused({ name, uri: uri(), codes });
  });

  it.each([
    ['HTTP:// in upper case', () => `HTTP://127.0.0.1:${T()}/app.jar`, R],
    ['HtTpS:// to a restricted address (refused before TLS)', () => `HtTpS://127.0.0.1:${T()}/app.jar`, R],
    ['file: while the file plugin is disabled', () => 'file:///etc/passwd.jar', ['GW_FETCH_SCHEME_UNSUPPORTED']],
    ['FILE: with a host', () => `FILE://127.0.0.1:${T()}/etc/app.jar`, ['GW_FETCH_SCHEME_UNSUPPORTED', 'GW_FETCH_URI_INVALID']],
    ['gopher:', () => `gopher://127.0.0.1:${T()}/_app.jar`, ['GW_FETCH_SCHEME_UNSUPPORTED']],
    ['ftp:', () => `ftp://127.0.0.1:${T()}/app.jar`, ['GW_FETCH_SCHEME_UNSUPPORTED']],
    ['s3 with host:port in the URI', () => `s3://127.0.0.1:${T()}/app.jar`, ['GW_FETCH_URI_INVALID']],
    ['s3 with the default endpoint on loopback', () => 's3://bucket/app.jar', R],
    ['s3a, bucket endpoint [::1]', () => 's3a://b-v6/app.jar', R],
    ['s3, bucket endpoint 127.0.0.2', () => 's3://b-v4b/app.jar', R],
    ['s3, bucket endpoint localhost (checked at lookup)', () => 's3://b-name/app.jar', R],
    ['s3, bucket endpoint 2130706433', () => 's3://b-decimal/app.jar', R],
    ['s3, bucket endpoint [::ffff:127.0.0.1]', () => 's3://b-mapped/app.jar', R],
    [
      's3, exempt endpoint answering 307 to loopback (not followed)',
      () => 's3://b-redirect/app.jar',
      ['GW_FETCH_UNAVAILABLE', 'GW_FETCH_DENIED', 'GW_FETCH_NOT_FOUND', 'GW_FETCH_RESTRICTED_HOST'],
    ],
    ['wasbs, account endpoint on loopback', () => 'wasbs://jars@acct.blob.core.windows.net/app.jar', R],
    ['wasbs, account endpoint localhost', () => 'wasbs://jars@acctname.blob.core.windows.net/app.jar', R],
    ['wasbs, account endpoint [::1]', () => 'wasbs://jars@acctsix.blob.core.windows.net/app.jar', R],
  ] as [string, () => string, string[]][])('refuses scheme confusion / plugin endpoint: %s', async (name, uri, codes) => {
    await expectRefused({ name, uri: uri(), codes });
  });

  const redirectTargets: [string, () => string, string[]][] = [
    ['127.0.0.1 (same host, other port)', () => `http://127.0.0.1:${T()}/app.jar`, R],
    ['127.0.0.2', () => `http://127.0.0.2:${T2()}/app.jar`, R],
    ['[::1]', () => `http://[::1]:${T6()}/app.jar`, R],
    ['[::ffff:127.0.0.1]', () => `http://[::ffff:127.0.0.1]:${T()}/app.jar`, R],
    ['6to4 [2002:7f00:1::]', () => `http://[2002:7f00:1::]:${T()}/app.jar`, R],
    ['2130706433', () => `http://2130706433:${T()}/app.jar`, R],
    ['0177.0.0.1', () => `http://0177.0.0.1:${T()}/app.jar`, R],
    ['127.1', () => `http://127.1:${T()}/app.jar`, R],
    ['0.0.0.0', () => `http://0.0.0.0:${T()}/app.jar`, R],
    ['localhost', () => `http://localhost:${T()}/app.jar`, R],
    ['scheme-relative //127.0.0.1', () => `//127.0.0.1:${T()}/app.jar`, R],
    ['HTTPS:// upper case', () => `HTTPS://127.0.0.1:${T()}/app.jar`, R],
    ['userinfo to the exempt host', () => `http://127.0.0.1:${origin.port}@127.0.0.1:${T()}/app.jar`, ['GW_FETCH_URI_INVALID']],
    ['file:', () => 'file:///etc/passwd', ['GW_FETCH_SCHEME_UNSUPPORTED']],
    ['s3: (no plugin switch on redirect)', () => 's3://bucket/app.jar', ['GW_FETCH_SCHEME_UNSUPPORTED']],
    ['gopher:', () => `gopher://127.0.0.1:${T()}/_x`, ['GW_FETCH_SCHEME_UNSUPPORTED']],
    ['a second exempt hop, then loopback', () => `${origin.url}/to?url=${encodeURIComponent(`http://[::1]:${T6()}/app.jar`)}`, R],
  ];

  for (const status of [301, 302, 303, 307, 308]) {
    it.each(redirectTargets)(`refuses a ${status} redirect from the exempt origin to %s`, async (name, target, codes) => {
      await expectRefused({
        name: `${status} → ${name}`,
        uri: `${origin.url}/to?code=${status}&url=${encodeURIComponent(target())}&f=app.jar`,
        codes,
      });
    });
  }

  it('refuses restricted jar URIs on run and plan too (operator path): no job, no connection', async () => {
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    const placeholder = String(up.body.filename).split('/').pop()!;
    for (const uri of [
      `http://[::1]:${T6()}/app.jar`,
      `${origin.url}/to?url=${encodeURIComponent(`http://127.0.0.2:${T2()}/app.jar`)}`,
      's3://b-name/app.jar',
    ]) {
      const before = leaked();
      const run = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
        jobId: newJobId(),
        flinkConfiguration: { 'user.artifacts.job-jar': uri },
      });
      const plan = await json('POST', `${gw.url}/jars/${placeholder}/plan`, { flinkConfiguration: { 'user.artifacts.job-jar': uri } });
      totals.tried += 2;
      for (const r of [run, plan]) {
        expect(r.status).toBe(400);
        expect((r.body.errors as string[])[0]).toMatch(/^GW_FETCH_RESTRICTED_HOST: /);
        totals.refused++;
      }
      totals.leaked += leaked() - before;
      expect(leaked() - before).toBe(0);
    }
    expect(jm.runs).toEqual([]);
  });

  it('control: the exempt origin is reachable, directly and after a redirect, and headers stay on their origin', async () => {
    const direct = await json('POST', `${gw.url}/jars/fetch`, { uri: `${origin.url}/app.jar#@127.0.0.1:${T()}/` });
    const crossOrigin = await json('POST', `${gw.url}/jars/fetch`, {
      uri: `${origin.url}/to?url=${encodeURIComponent(`${origin.altUrl}/app.jar`)}&n=1`,
    });
    totals.tried += 2;
    totals.allowedControls += 2;
    expect(direct).toMatchObject({ status: 200, body: { status: 'success' } });
    expect(crossOrigin).toMatchObject({ status: 200, body: { status: 'success' } });
    const got = origin.requests.filter((r) => r.path === '/app.jar');
    // Requests that reached the file under its own origin (127.0.0.1) carry the configured header;
    // the ones that arrived through the redirect to localhost (another origin) carry none.
    const viaLocalhost = got.filter((r) => String(r.headers.host).startsWith('localhost:'));
    const viaIp = got.filter((r) => String(r.headers.host).startsWith('127.0.0.1:'));
    expect(viaIp.length).toBeGreaterThan(0);
    expect(viaLocalhost.length).toBeGreaterThan(0);
    for (const r of viaIp) expect(r.headers.authorization).toBe(`Bearer ${HEADER_CANARY}`);
    for (const r of viaLocalhost) expect(r.headers.authorization).toBeUndefined();
    expect(leaked()).toBe(0);
    expect(JSON.stringify(gw.logs)).not.toContain(HEADER_CANARY);
  });

  it('after all of the above: 0 connections at every trap', () => {
    expect({
      v4: traps.v4.accepted,
      v4b: traps.v4b.accepted,
      v6: traps.v6.accepted,
      from: [...traps.v4.from, ...traps.v4b.from, ...traps.v6.from],
    }).toEqual({ v4: 0, v4b: 0, v6: 0, from: [] });
    expect(totals.leaked).toBe(0);
  });
});

/**
 * Names resolved by a DNS server on loopback (c-ares pointed at it through the guard's injectable
 * resolver), through the real fetcher and the HTTP and S3 plugins: names of restricted addresses,
 * and a rebinding name whose first answer is allowed and whose next answer is not. The check must be
 * on the address each connection actually uses, not on an earlier answer.
 */
describe('SSRF guard with names from a DNS server on loopback (injectable resolver)', () => {
  let dns: DnsServer;
  let traps: { v4: TrapListener; v4b: TrapListener; v6: TrapListener; rebindTrap: TrapListener };
  let exempt: Server;
  let exemptPort: number;
  const exemptRequests: string[] = [];
  let dir: string;
  let fetcher: ArtifactFetcher;
  let registry: PluginRegistry;
  const dnsTotals = { tried: 0, refused: 0, leaked: 0 };

  beforeAll(async () => {
    // The allowed origin for the rebinding name: 127.0.0.1:<port>, closing every connection so that
    // the next request must connect (and resolve) again.
    exempt = createServer((req, res) => {
      exemptRequests.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-length': String(JAR.length), etag: '"rebind"', connection: 'close' });
      res.end(req.method === 'HEAD' ? undefined : JAR);
    });
    await new Promise<void>((resolve) => exempt.listen(0, '127.0.0.1', () => resolve()));
    exemptPort = (exempt.address() as AddressInfo).port;
    const [v4, v4b, v6, rebindTrap] = await Promise.all([
      startTrapListener('127.0.0.1', JAR),
      startTrapListener('127.0.0.2', JAR),
      startTrapListener('::1', JAR),
      startTrapListener('127.0.0.2', JAR, exemptPort), // same port as the exempt origin, other address
    ]);
    traps = { v4, v4b, v6, rebindTrap };
    dns = await startDnsServer({
      'loop4.test': { A: ['127.0.0.1'] },
      'loop4b.test': { A: ['127.0.0.2'] },
      'loop6.test': { AAAA: ['::1'] },
      'mapped.test': { AAAA: ['::ffff:127.0.0.1'] },
      'sixtofour.test': { AAAA: ['2002:7f00:1::'] },
      'teredo.test': { AAAA: ['2001:0:808:808::80ff:fffe'] },
      'zero.test': { A: ['0.0.0.0'] },
      'mixed.test': { A: ['127.0.0.2'], AAAA: ['::1'] },
      's3-loop.test': { A: ['127.0.0.1'] },
      'allowed.test': { A: ['127.0.0.1'] },
      // Rebinding: the first answer is the exempt address, every later one a restricted address.
      'rebind.test': { A: (n) => (n === 1 ? ['127.0.0.1'] : ['127.0.0.2']) },
    });
    dir = mkdtempSync(join(tmpdir(), 'gw-ssrf-dns-'));
    const log = pino({ level: 'silent' });
    const raw = new Map<string, RawEntry>(
      Object.entries({
        'user.artifacts.raw-http-enabled': 'true',
        's3.access-key': 'AKIDSSRFDNS',
        's3.secret-key': 'ssrf-dns-secret',
        's3.path.style.access': 'true',
        's3.endpoint': `http://s3-loop.test:${traps.v4.port}`,
      }).map(([k, v]) => [k, { value: v, source: 'test' }]),
    );
    const config = createRegistry([httpPlugin, s3Plugin]).resolve(raw);
    const guard = createConnectGuard({ enabled: true, allowed: [`127.0.0.1:${exemptPort}`], resolve: resolverFor(dns) });
    registry = new PluginRegistry([httpPlugin, s3Plugin], (p) => ({
      config,
      log: log.child({ plugin: p.name }),
      guard,
      errors: fetchError,
    }));
    const cache = new JarCache(dir, 1024 ** 3, log);
    await cache.init();
    fetcher = new ArtifactFetcher({
      plugins: registry,
      cache,
      slots: new FetchQueue(4, 32),
      progress: new FetchProgress(),
      allowedSchemes: ['http', 'https', 's3'],
      maxBytes: 1024 ** 2,
      timeoutMs: 20_000,
      retries: 0,
      progressIntervalMs: 60_000,
      log,
    });
  }, 30_000);

  afterAll(async () => {
    await registry?.close();
    await dns?.stop();
    await new Promise<void>((resolve) => (exempt ? exempt.close(() => resolve()) : resolve()));
    await Promise.all(Object.values(traps ?? {}).map((t) => t.stop()));
    rmSync(dir, { recursive: true, force: true });
    process.stderr.write(
      `SSRF (DNS) summary: requests tried ${dnsTotals.tried}, refused ${dnsTotals.refused}, connections that reached a restricted listener ${dnsTotals.leaked} (must be 0)\n`,
    );
  });

  const leaked = () => traps.v4.accepted + traps.v4b.accepted + traps.v6.accepted + traps.rebindTrap.accepted;

  async function refusal(uri: string): Promise<string> {
    const before = leaked();
    dnsTotals.tried++;
    const code = await fetcher.fetch(uri).then(
      (jar) => {
        jar.release();
        return 'fetched';
      },
      (err: { code?: string }) => err.code ?? String(err),
    );
    if (code !== 'fetched') dnsTotals.refused++;
    dnsTotals.leaked += leaked() - before;
    expect(leaked() - before).toBe(0);
    return code;
  }

  it.each([
    ['A 127.0.0.1', () => `http://loop4.test:${traps.v4.port}/app.jar`],
    ['A 127.0.0.2', () => `http://loop4b.test:${traps.v4b.port}/app.jar`],
    ['AAAA ::1', () => `http://loop6.test:${traps.v6.port}/app.jar`],
    ['AAAA ::ffff:127.0.0.1', () => `http://mapped.test:${traps.v4.port}/app.jar`],
    ['AAAA 2002:7f00:1:: (6to4 of 127.0.0.1)', () => `http://sixtofour.test:${traps.v4.port}/app.jar`],
    ['AAAA 2001:0:808:808::80ff:fffe (Teredo, client 127.0.0.1)', () => `http://teredo.test:${traps.v4.port}/app.jar`],
    ['A 0.0.0.0', () => `http://zero.test:${traps.v4.port}/app.jar`],
    ['A and AAAA, both restricted', () => `http://mixed.test:${traps.v6.port}/app.jar`],
    ['S3 endpoint name resolving to 127.0.0.1', () => 's3://bucket/app.jar'],
  ])('a name resolving to a restricted address is refused at connect time: %s', async (_name, uri) => {
    expect(await refusal(uri())).toBe('GW_FETCH_RESTRICTED_HOST');
  });

  it('a name the DNS server does not know fails as unavailable, without a connection', async () => {
    expect(await refusal(`http://nxdomain.test:${traps.v4.port}/app.jar`)).toBe('GW_FETCH_UNAVAILABLE');
  });

  it('control: a name resolving to an exempt host:port is fetched', async () => {
    const jar = await fetcher.fetch(`http://allowed.test:${exemptPort}/app.jar`);
    jar.release();
    expect(jar.size).toBe(JAR.length);
  });

  it('DNS rebinding: allowed at the first connection, refused at the next, which goes to the new answer', async () => {
    const served = exemptRequests.length;
    const code = await refusal(`http://rebind.test:${exemptPort}/app.jar`);
    expect(code).toBe('GW_FETCH_RESTRICTED_HOST');
    // The HEAD went to the first answer (allowed); the GET needed a new connection, was resolved
    // again and refused: nothing reached 127.0.0.2 on the same port.
    expect(exemptRequests.slice(served)).toEqual(['HEAD /app.jar']);
    expect(dns.queries.get('rebind.test/A')).toBeGreaterThanOrEqual(2);
    expect(traps.rebindTrap.accepted).toBe(0);
  });
});

describe('restricted address forms (unit)', () => {
  it.each([
    '::7f00:1',
    '::127.0.0.1',
    '::a9fe:a9fe',
    '::169.254.169.254',
    '::ffff:0:7f00:1',
    '::ffff:0:127.0.0.1',
    '::8.8.8.8',
    '::ffff:a9fe:a9fe',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b:1::1',
    'fd00:ec2::254',
    '169.254.169.254',
    '0.0.0.0',
    '::',
    '2002:7f00:1::',
    '2002:a9fe:a9fe::1',
    '2002:a00:1::',
    '2001:0:808:808::80ff:fffe',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
  ])('%s is restricted (IPv4-compatible, -translated, 6to4 and Teredo forms included)', (a) => expect(isRestrictedAddress(a)).toBe(true));

  it.each(['::ffff:8.8.8.8', '64:ff9b::808:808', '2606:4700::1111', '1.2.3.4', '2002:808:808::1', '2001:4860:4860::8888'])(
    '%s is not',
    (a) => expect(isRestrictedAddress(a)).toBe(false),
  );
});

/**
 * Link-local metadata addresses (169.254.169.254, fd00:ec2::254) and a public address cannot be
 * used on the host: the test makes a network namespace (root only) with those addresses on its
 * loopback interface and no route out, and runs the real gateway binary inside it, with names in
 * the namespace's own /etc/hosts. DNS rebinding there is the real thing: the first answer is a
 * public address, the next the metadata address.
 */
const netns = netnsAvailable();
(netns.ok ? describe : describe.skip)(
  `SSRF guard in a network namespace (link-local, public-first rebinding)${netns.ok ? '' : ` — skipped: ${netns.reason}`}`,
  () => {
    let report: NetnsReport;

    beforeAll(async () => {
      report = await runNetnsProbe();
      process.stderr.write(
        `SSRF (netns) summary: requests tried ${report.cases.length}, refused ${report.cases.filter((c) => c.status >= 400).length}, ` +
          `connections that reached a restricted listener ${report.trapConnections.meta4 + report.trapConnections.meta6} (must be 0)\n`,
      );
    }, 120_000);

    it('refuses every metadata-address form, name and redirect, with 0 connections at 169.254.169.254 and fd00:ec2::254', () => {
      const refused = report.cases.filter((c) => c.expect === 'refused');
      expect(refused.length).toBeGreaterThan(15);
      for (const c of refused)
        expect({ uri: c.uri, status: c.status, code: c.code }).toEqual({ uri: c.uri, status: 400, code: 'GW_FETCH_RESTRICTED_HOST' });
      expect(report.trapConnections).toEqual({ meta4: 0, meta6: 0 });
    });

    it('control: a public address is reachable (the namespace proves the guard is not refusing everything)', () => {
      const ok = report.cases.filter((c) => c.expect === 'fetched');
      expect(ok.length).toBeGreaterThan(0);
      for (const c of ok) expect({ uri: c.uri, status: c.status }).toEqual({ uri: c.uri, status: 200 });
    });

    it('DNS rebinding: the public first answer served the HEAD, the metadata answer was refused at the next connect', () => {
      const rebind = report.cases.find((c) => c.name === 'rebinding')!;
      expect(rebind).toMatchObject({ status: 400, code: 'GW_FETCH_RESTRICTED_HOST' });
      expect(report.publicRequests.filter((r) => r.startsWith('HEAD /rebind'))).toHaveLength(1);
      expect(report.publicRequests.filter((r) => r.startsWith('GET /rebind'))).toHaveLength(0);
    });
  },
);
