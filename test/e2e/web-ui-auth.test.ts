import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContextOptions } from 'playwright-core';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { issueCert, makeTestCa } from '../servers/tls';

/**
 * The Flink Web UI with authentication on (docs/web-ui.md, ways 1 and 2): the
 * dashboard cannot send a bearer token itself, so it works with a client certificate in the browser,
 * or behind something that adds the Authorization header to every request (a reverse proxy; here
 * the browser context's extra headers stand in for it), and is refused otherwise.
 *
 * Browser set-up as in web-ui.test.ts (Debian's chromium driven by playwright-core). Playwright
 * presents the PKCS12 client certificate through its own TLS connection to the gateway, which the
 * gateway cannot tell from a browser's; the test CA is not in the browser's trust store, hence
 * ignoreHTTPSErrors.
 */
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const WAIT_MS = 30_000;
const TOKEN = 'tok-web-ui-proxy-7';
const PFX_PASSWORD = 'alice-p12-pw';

describe('the Flink Web UI with authentication on, in headless Chromium', () => {
  let dir: string;
  let gw: TestGateway;
  let browser: Browser;
  let pfxPath: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `${CHROMIUM} is missing: install Debian's "chromium" package (apt-get install -y chromium) to run the Web UI e2e test`,
      );
    }
    dir = mkdtempSync(join(tmpdir(), 'gw-web-ui-auth-'));
    const serverCa = makeTestCa(dir, 'server');
    const userCa = makeTestCa(dir, 'users');
    const server = issueCert(dir, serverCa, 'gateway', { cn: 'localhost', use: 'server' });
    const alice = issueCert(dir, userCa, 'alice', { cn: 'alice', use: 'client' });
    pfxPath = join(dir, 'alice.p12');
    execFileSync(
      'openssl',
      ['pkcs12', '-export', '-in', alice.cert, '-inkey', alice.key, '-name', 'alice', '-out', pfxPath, '-passout', `pass:${PFX_PASSWORD}`],
      { stdio: 'pipe' },
    );
    writeFileSync(join(dir, 'tokens'), `web-proxy ${createHash('sha256').update(TOKEN).digest('hex')}\n`);
    gw = await startGateway(flinkUrl(), {
      'gateway.tls.cert': server.cert,
      'gateway.tls.key': server.key,
      'gateway.tls.client-ca': userCa.cert,
      'gateway.auth.tokens-file': join(dir, 'tokens'),
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: WAIT_MS });
  });
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Opens the overview; resolves with the dashboard's status and every non-2xx response from the gateway. */
  async function openOverview(
    options: BrowserContextOptions,
  ): Promise<{ document: number; rendered: boolean; refused: string[]; body: string }> {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, ...options });
    context.setDefaultTimeout(WAIT_MS);
    try {
      const page = await context.newPage();
      const refused: string[] = [];
      page.on('response', (r) => {
        if (r.url().startsWith(gw.url) && (r.status() < 200 || r.status() > 299))
          refused.push(`${r.status()} ${new URL(r.url()).pathname}`);
      });
      const doc = await page.goto(`${gw.url}/#/overview`);
      let rendered = false;
      if (doc?.status() === 200) {
        // The header's version comes from GET /config, the task-slot card from GET /overview.
        await page.locator('nz-header strong', { hasText: 'Version:' }).waitFor();
        await page.locator('flink-overview-statistic nz-card[nztitle="Available Task Slots"] .total').waitFor();
        rendered = true;
      }
      return { document: doc?.status() ?? 0, rendered, refused, body: rendered ? '' : ((await doc?.text()) ?? '') };
    } finally {
      await context.close();
    }
  }

  it('without credentials the dashboard itself is refused (401 GW_AUTH_REQUIRED)', async () => {
    const r = await openOverview({});
    expect(r).toMatchObject({ document: 401, rendered: false });
    expect(JSON.parse(r.body)).toEqual({ errors: [expect.stringMatching(/^GW_AUTH_REQUIRED: /)] });
  });

  it('works with a client certificate (PKCS12) from the CA in gateway.tls.client-ca', async () => {
    const from = gw.logs.length;
    const r = await openOverview({ clientCertificates: [{ origin: gw.url, pfxPath, passphrase: PFX_PASSWORD }] });
    expect(r).toEqual({ document: 200, rendered: true, refused: [], body: '' });
    const principals = new Set(
      gw.logs
        .slice(from)
        .filter((l) => l.msg === 'request')
        .map((l) => l.principal),
    );
    expect([...principals]).toEqual(['cert:alice']);
  });

  it('works when every request carries the bearer token, as a header-adding reverse proxy sends it', async () => {
    const from = gw.logs.length;
    const r = await openOverview({ extraHTTPHeaders: { authorization: `Bearer ${TOKEN}` } });
    expect(r).toEqual({ document: 200, rendered: true, refused: [], body: '' });
    const principals = new Set(
      gw.logs
        .slice(from)
        .filter((l) => l.msg === 'request')
        .map((l) => l.principal),
    );
    expect([...principals]).toEqual(['token:web-proxy']);
  });
});
