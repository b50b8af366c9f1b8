import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { json, uploadFile, WORDCOUNT_JAR } from '../helpers/flink';

/**
 * The Flink Web UI (Flink 2.1's Angular dashboard) used through the gateway in a real headless
 * browser: the dashboard's static files and its REST polling go through the pass-through, while the
 * "Submit New Job" page talks to the gateway's own /jars routes.
 *
 * The browser is Debian's `chromium` package driven by playwright-core; nothing is downloaded.
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
const ARTIFACTS = join(__dirname, '.artifacts');
/** Upper bound for any single wait on the page (the dashboard polls every few seconds). */
const WAIT_MS = 30_000;

describe('Flink Web UI through the gateway, in headless Chromium', () => {
  let gw: TestGateway;
  let browser: Browser;
  let context: BrowserContext;
  /** Everything that went wrong in the page: console errors, uncaught exceptions, failed or non-2xx requests. */
  let problems: string[];

  beforeAll(async () => {
    // CI installs the browser; a missing one must fail loudly instead of skipping the UI coverage.
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `${CHROMIUM} is missing: install Debian's "chromium" package (apt-get install -y chromium) to run the Web UI e2e test`,
      );
    }
    gw = await startGateway(flinkUrl());
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: WAIT_MS });
    // A fresh context is a fresh, empty profile: no cache, so every static file really goes through the gateway.
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    context.setDefaultTimeout(WAIT_MS);
    mkdirSync(ARTIFACTS, { recursive: true });
  });

  afterAll(async () => {
    await browser?.close();
    await gw?.close();
  });

  /** A new tab that records every problem the dashboard runs into while talking to the gateway. */
  async function openPage(): Promise<Page> {
    problems = [];
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => {
      // The dashboard cancels in-flight polls when the route changes; that is not a gateway failure.
      if (r.failure()?.errorText !== 'net::ERR_ABORTED')
        problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
    });
    page.on('response', (r) => {
      if (r.url().startsWith(gw.url) && (r.status() < 200 || r.status() > 299))
        problems.push(`HTTP ${r.status()}: ${r.request().method()} ${r.url()}`);
    });
    return page;
  }

  it('renders the overview page with the cluster data from the JobManager', async () => {
    // What the dashboard should show, asked through the same gateway.
    const overview = (await json('GET', `${gw.url}/overview`)).body;
    const config = (await json('GET', `${gw.url}/config`)).body;
    const version = String(config['flink-version']);
    expect(version).toMatch(/^2\.1\./);

    const page = await openPage();
    await page.goto(`${gw.url}/#/overview`);

    // The header's version comes from GET /config, which the dashboard loads before anything else.
    await page
      .locator('nz-header span', { has: page.locator('strong', { hasText: 'Version:' }) })
      .filter({ hasText: version })
      .waitFor();

    // The statistic cards render their `.total` only once GET /overview has answered.
    const slotsCard = page.locator('flink-overview-statistic nz-card[nztitle="Available Task Slots"]');
    await slotsCard.locator('.total').waitFor();
    /** The value next to a label in a card's footer, e.g. "Task Managers 1". */
    const field = (label: string) => slotsCard.locator('.footer .field', { hasText: label }).locator('span').nth(1);
    expect(await field('Task Managers').textContent()).toBe(String(overview.taskmanagers));
    expect(await field('Total Task Slots').textContent()).toBe(String(overview['slots-total']));
    // Other e2e tests share the cluster and may hold slots right now: only check it is a sane count.
    const available = Number((await slotsCard.locator('.total').textContent())?.trim());
    expect(available).toBeGreaterThanOrEqual(0);
    expect(available).toBeLessThanOrEqual(Number(overview['slots-total']));

    // The job lists come from GET /jobs/overview; their tables being there means that call worked too.
    await page.locator('flink-job-list nz-card', { hasText: 'Running Job List' }).locator('table').waitFor();
    await page.locator('flink-job-list nz-card', { hasText: 'Completed Job List' }).locator('table').waitFor();

    await page.screenshot({ path: join(ARTIFACTS, 'web-ui-overview.png') });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('lists a jar uploaded through the gateway on "Submit New Job", plans it and deletes it', async () => {
    // A unique name: other e2e tests upload WordCount.jar to the same cluster at the same time, and the
    // dashboard shows names, not ids.
    const name = `WordCount-web-ui-${randomBytes(4).toString('hex')}.jar`;
    const up = await uploadFile(gw.url, WORDCOUNT_JAR, name);
    expect(up.status).toBe(200);
    const jarId = String(up.body.filename).split('/').pop()!;
    try {
      const listed = ((await json('GET', `${gw.url}/jars`)).body.files as { id: string; entry: { name: string }[] }[]).find(
        (f) => f.id === jarId,
      );
      const entryClass = listed!.entry[0]!.name;

      const page = await openPage();
      await page.goto(`${gw.url}/#/submit`);

      // The "Uploaded Jars" table is filled from GET /jars, which the gateway answers itself.
      const row = page.locator('flink-submit tr.ant-table-row', { hasText: name });
      await row.waitFor();
      expect(await row.locator('td').nth(2).innerText()).toBe(entryClass);

      // Clicking the row opens the submit form; "Show Plan" asks the gateway for the plan of this jar
      // by its id, which proves the row is the jar we uploaded (the table itself shows no ids).
      await row.click();
      const [planResponse] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(`${gw.url}/jars/${jarId}/plan`)),
        page.getByRole('button', { name: 'Show Plan' }).click(),
      ]);
      expect(planResponse.status()).toBe(200);
      const planNodes = ((await planResponse.json()) as { plan: { nodes: unknown[] } }).plan.nodes;
      expect(planNodes.length).toBeGreaterThan(0);
      // The plan opens in a drawer as a graph with one box per job vertex. (Flink 2.x plans have an empty
      // "operator" field, so the boxes only say "Parallelism: 1"; the same happens without the gateway.)
      const drawer = page.locator('.ant-drawer-content', { hasText: 'Plan Visualization' });
      const boxes = drawer.locator('flink-dagre .node-label', { hasText: 'Parallelism:' });
      await boxes.first().waitFor();
      expect(await boxes.count()).toBe(planNodes.length);
      await page.screenshot({ path: join(ARTIFACTS, 'web-ui-submit-plan.png') });
      await drawer.getByRole('button', { name: 'Close' }).click();

      // Delete through the dashboard ("Delete" then confirm): DELETE /jars/:id on the gateway.
      await row.locator('td.delete-jar a').click();
      const [deleteResponse] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'DELETE' && r.url() === `${gw.url}/jars/${jarId}`),
        page.locator('.ant-popover').getByRole('button', { name: 'OK' }).click(),
      ]);
      expect(deleteResponse.status()).toBe(200);
      await row.waitFor({ state: 'detached' });

      expect(problems).toEqual([]);
      await page.close();
    } finally {
      // Never leave the jar behind, whatever failed above (400 = already deleted by the UI).
      const del = await json('DELETE', `${gw.url}/jars/${jarId}`);
      expect([200, 400]).toContain(del.status);
    }
  });
});
