import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { projectRoot } from '../../src/project-root';
import { builtinTokenProviders as builtInTokenProviders } from '../../fs-plugins';
import { json, newJobId, uploadFile, waitForJobState } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { assertMatchesSpec } from '../helpers/openapi';

/**
 * Tokens reach the job's TASKS through the delivery path of docs/adr/0005-token-delivery.md, on the
 * real embedded Flink cluster:
 *
 *   built-in oauth2 provider (against a node:http token endpoint) → gateway receivers
 *   → GET /gateway/v1/tokens/bridge → the `gateway` DelegationTokenProvider in the JobManager
 *   → Flink's delegation-token manager → ResourceManager → TaskManager → `gateway` receiver
 *   → GatewayTokens.forJob(<job id from the RuntimeContext>) in a map function (TokenProbe).
 *
 * The cluster is one per jest run and starts before any test gateway exists, so its bridge cannot
 * be given a gateway URL up front: test/global-setup.ts points it at a URL file and a secret file
 * in E2E_TOKEN_BRIDGE_DIR; this test's gateway creates the secret (gateway.tokens.bridge-secret-file)
 * and the test writes the gateway's URL once it listens (and removes it at the end). Polling every
 * 500 ms.
 */

const TEST_JOB_JAR = join(projectRoot(__dirname), 'embedded-flink', 'target', 'test-jars', 'GatewayTestJob.jar');
const PROBE = 'dev.flinkjargateway.testjobs.TokenProbe';
const CLIENT_SECRET = 'e2e-client-secret-DO-NOT-LOG';
const TOKEN_PREFIX = 'e2e-access-token-';

async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

/** A client-credentials token endpoint: each request gets a new token, valid for an hour. */
function startTokenEndpoint(): Promise<{ server: Server; url: string; requests: () => number }> {
  let n = 0;
  const server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => {
      const ok = req.headers.authorization === `Basic ${Buffer.from(`e2e-client:${CLIENT_SECRET}`).toString('base64')}`;
      const body = ok ? { access_token: `${TOKEN_PREFIX}${++n}`, token_type: 'Bearer', expires_in: 3600 } : { error: 'invalid_client' };
      res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth/token`, requests: () => n }),
    ),
  );
}

describe("token delivery to the job's tasks on the real embedded Flink cluster", () => {
  const bridgeDir = process.env.E2E_TOKEN_BRIDGE_DIR;
  let endpoint: Awaited<ReturnType<typeof startTokenEndpoint>>;
  let storeDir: string;
  let fileDir: string;
  let gw: TestGateway;
  let jarId: string;
  const bridgeUrl = () => `${gw.url}/gateway/v1/tokens/bridge`;
  const secret = () => readFileSync(join(bridgeDir!, 'bridge-secret'), 'utf8').trim();
  const bridge = async (authorization?: string) => {
    const res = await request(bridgeUrl(), { headers: authorization ? { authorization } : {} });
    return {
      status: res.statusCode,
      headers: res.headers as Record<string, unknown>,
      body: (await res.body.json()) as Record<string, unknown>,
    };
  };
  const jobsInBridge = async (): Promise<string[]> => {
    const r = await bridge(`Bearer ${secret()}`);
    const b64 = (r.body.tokens as Record<string, string>).oauth2;
    return b64 ? Object.keys((JSON.parse(Buffer.from(b64, 'base64').toString('utf8')) as { jobs: object }).jobs) : [];
  };
  const runProbe = (jobId: string, args: string[]) =>
    json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      entryClass: PROBE,
      programArgsList: args,
      flinkConfiguration: { 'parallelism.default': '1' },
    });

  beforeAll(async () => {
    if (!bridgeDir) throw new Error('E2E_TOKEN_BRIDGE_DIR is not set (the embedded cluster was started without the token bridge)');
    endpoint = await startTokenEndpoint();
    storeDir = mkdtempSync(join(tmpdir(), 'gw-e2e-delivery-store-'));
    fileDir = join(mkdtempSync(join(tmpdir(), 'gw-e2e-delivery-files-')), 'tokens');
    gw = await startGateway(
      flinkUrl(),
      {
        'gateway.tokens.store-dir': storeDir,
        'gateway.tokens.watcher.interval': '200 ms',
        'gateway.tokens.watcher.missing-grace': '0 ms',
        'security.delegation.tokens.reobtain.cooldown': '0 ms',
        'gateway.tokens.bridge-secret-file': join(bridgeDir, 'bridge-secret'),
        'gateway.tokens.file-receiver.dir': fileDir,
        'security.delegation.token.provider.oauth2.token-endpoint': endpoint.url,
        'security.delegation.token.provider.oauth2.client-id': 'e2e-client',
        'security.delegation.token.provider.oauth2.client-secret': CLIENT_SECRET,
      },
      [],
      // The three built-in providers as main.ts loads them (azure-blob and s3 stay inactive: not
      // configured); no receivers given, so each is paired with the gateway's delivery receiver.
      { providers: builtInTokenProviders.map((p) => p.create()) },
    );
    // Now the bridge in the JobManager may find this gateway (atomically: it re-reads the file).
    writeFileSync(join(bridgeDir, 'url.tmp'), `${gw.url}\n`);
    renameSync(join(bridgeDir, 'url.tmp'), join(bridgeDir, 'url'));
    jarId = String((await uploadFile(gw.url, TEST_JOB_JAR, 'GatewayTestJob.jar')).body.filename)
      .split('/')
      .pop()!;
  }, 60_000);

  afterAll(async () => {
    if (bridgeDir) rmSync(join(bridgeDir, 'url'), { force: true });
    if (gw) {
      await json('DELETE', `${gw.url}/jars/${jarId}`).catch(() => undefined);
      await gw.close();
    }
    await new Promise<void>((resolve) => (endpoint ? endpoint.server.close(() => resolve()) : resolve()));
    rmSync(storeDir, { recursive: true, force: true });
    rmSync(join(fileDir, '..'), { recursive: true, force: true });
  });

  it("a registered job's tasks read its own OAuth token: gateway → bridge → Flink → TaskManager → GatewayTokens.forJob", async () => {
    const jobId = newJobId();
    const started = Date.now();
    // The task holds on for 5 s after reading its token: the job file exists only while the job is
    // registered, and on a loaded machine the watcher could otherwise drop it between two polls.
    const run = await runProbe(jobId, ['--provider', 'oauth2', '--expect', TOKEN_PREFIX, '--timeout-ms', '30000', '--hold-ms', '5000']);
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });

    // The gateway holds the job's token (the provider's re-obtain request ran a cycle) ...
    expect(
      await eventually(async () => (await jobsInBridge()).includes(jobId) || undefined, 'the job in the bridge container', 10_000),
    ).toBe(true);
    // ... and its file receiver wrote the job's file: versioned JSON, mode 0600.
    const file = join(fileDir, `${jobId}.json`);
    const doc = await eventually(() => {
      try {
        return JSON.parse(readFileSync(file, 'utf8')) as {
          version: number;
          jobId: string;
          updatedAt: string;
          tokens: { oauth2?: { accessToken: string; tokenType: string } };
        };
      } catch {
        return undefined;
      }
    }, 'the job token file');
    expect(doc).toMatchObject({
      version: 1,
      jobId,
      tokens: { oauth2: { accessToken: expect.stringMatching(new RegExp(`^${TOKEN_PREFIX}\\d+$`)), tokenType: 'Bearer' } },
    });
    expect(Date.parse(doc.updatedAt)).toBeGreaterThanOrEqual(started - 1000);
    expect(statSync(file).mode & 0o777).toBe(0o600);

    // The TokenProbe's map function found the token in its task (otherwise it fails the job).
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'], 60_000)).toBe('FINISHED');
    process.stderr.write(`token delivery: run → FINISHED in ${Date.now() - started} ms (includes bridge polling every 500 ms)\n`);

    // Once the job ended, the watcher unregisters it: its file goes, and the bridge stops serving its token.
    await eventually(() => !readdirSync(fileDir).includes(`${jobId}.json`) || undefined, 'the job token file to be removed');
    expect(await jobsInBridge()).not.toContain(jobId);
    expect(readdirSync(fileDir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    expect(endpoint.requests()).toBeGreaterThanOrEqual(1);
  });

  it('the probe is not vacuous: a task that never gets its token fails the job', async () => {
    const jobId = newJobId();
    const run = await runProbe(jobId, ['--provider', 'not-a-provider', '--timeout-ms', '1500']);
    expect(run.status).toBe(200);
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'], 60_000)).toBe('FAILED');
    const exceptions = await json('GET', `${gw.url}/v1/jobs/${jobId}/exceptions`);
    expect(JSON.stringify(exceptions.body)).toContain(`token-probe: no matching not-a-provider token for job ${jobId}`);
  });

  it("the bridge endpoint answers only with the bridge secret, in Flink's envelope, as documented", async () => {
    for (const auth of [undefined, 'Bearer not-the-secret-0123456789']) {
      const r = await bridge(auth);
      assertMatchesSpec('GET', '/gateway/v1/tokens/bridge', r);
      expect(r.status).toBe(401);
      expect(String((r.body.errors as string[])[0])).toMatch(/^GW_TOKENS_BRIDGE_UNAUTHORIZED: /);
    }
    const ok = await bridge(`Bearer ${secret()}`);
    assertMatchesSpec('GET', '/gateway/v1/tokens/bridge', ok);
    expect(ok.status).toBe(200);
    expect(ok.headers['cache-control']).toBe('no-store');
    expect(ok.body).toMatchObject({ version: 1, tokens: { oauth2: expect.any(String) } });
    expect(typeof ok.body.validUntil).toBe('number');
    expect(statSync(join(bridgeDir!, 'bridge-secret')).mode & 0o777).toBe(0o600);
  });

  it("never writes a token value, the client secret or the bridge secret to the gateway's log", () => {
    const text = JSON.stringify(gw.logs);
    expect(text).toContain('Delegation token provider loaded and initialized'); // the log is really captured
    expect(text).not.toContain(TOKEN_PREFIX);
    expect(text).not.toContain(CLIENT_SECRET);
    expect(text).not.toContain(secret());
  });
});
