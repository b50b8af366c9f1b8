import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpPlugin } from '../../fs-plugins/http';
import { errorCode, json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';
import { startTrapListener, type TrapListener } from '../servers/trap-listener';

const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const WORDCOUNT = readFileSync(WORDCOUNT_JAR);
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

/** Common origin: WordCount under allowed and disallowed prefixes. */
async function origin(): Promise<HttpOrigin> {
  return startHttpOrigin({
    files: { '/releases/wordcount.jar': WORDCOUNT, '/releases-old/wordcount.jar': WORDCOUNT, '/private/wordcount.jar': WORDCOUNT },
  });
}

function remoteJarOptions(o: HttpOrigin): Record<string, string> {
  return {
    'web.submit.jar-uri.enable': 'true',
    'gateway.artifacts.allowed-schemes': 'http',
    'user.artifacts.raw-http-enabled': 'true',
    'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${o.port}`,
  };
}

async function cancelQuietly(url: string, jobId: string, headers: Record<string, string> = {}): Promise<void> {
  await json('PATCH', `${url}/v1/jobs/${jobId}?mode=cancel`, undefined, headers).catch(() => undefined);
}

describe('fetched-only policy mode on the real embedded Flink', () => {
  let o: HttpOrigin;
  let gw: TestGateway;
  let placeholder: string;
  /** An uploaded placeholder whose manifest names a class the JobManager has: still an upload, so it never runs. */
  let uploadedWordcount: string;

  beforeAll(async () => {
    o = await origin();
    gw = await startGateway(flinkUrl(), { ...remoteJarOptions(o), 'gateway.policy.mode': 'fetched-only' }, [httpPlugin]);
    // Placeholder uploads stay allowed: the operator uploads one before a run by URI.
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    expect(up.status).toBe(200);
    placeholder = String(up.body.filename).split('/').pop()!;
    const manifestOnly = buildJar({
      'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: org.apache.flink.streaming.examples.wordcount.WordCount\n',
    });
    const wc = await uploadBytes(gw.url, [{ name: 'WordCount.jar', bytes: manifestOnly }]);
    expect(wc.status).toBe(200);
    uploadedWordcount = String(wc.body.filename).split('/').pop()!;
  }, 60_000);

  afterAll(async () => {
    for (const id of [placeholder, uploadedWordcount]) await json('DELETE', `${gw.url}/v1/jars/${id}`).catch(() => undefined);
    await gw?.close();
    await o?.stop();
  });

  it('accepts only placeholder uploads: a jar with classes is refused before the JobManager keeps it (403 GW_POLICY_FETCHED_ONLY)', async () => {
    const wc = await uploadBytes(gw.url, [{ name: 'WordCount.jar', bytes: WORDCOUNT }]);
    expect({ status: wc.status, code: errorCode(wc) }).toEqual({ status: 403, code: 'GW_POLICY_FETCHED_ONLY' });
    expect(String((wc.body.errors as string[])[0])).toMatch(/with classes/);
  });

  it('refuses to run or plan an uploaded jar (403 GW_POLICY_FETCHED_ONLY), and no job starts', async () => {
    const jobId = newJobId();
    const run = await json('POST', `${gw.url}/v1/jars/${uploadedWordcount}/run`, { jobId });
    expect(run.status).toBe(403);
    expect(errorCode(run)).toBe('GW_POLICY_FETCHED_ONLY');
    expect(String((run.body.errors as string[])[0])).toMatch(/user\.artifacts\.job-jar/);
    expect((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).status).toBe(404);
    for (const method of ['GET', 'POST']) {
      const plan = await json(method, `${gw.url}/jars/${uploadedWordcount}/plan`, method === 'POST' ? {} : undefined);
      expect({ method, status: plan.status, code: errorCode(plan) }).toEqual({ method, status: 403, code: 'GW_POLICY_FETCHED_ONLY' });
    }
    const audit = gw.audit().filter((a) => a.audit === 'submission' && a.jarId === uploadedWordcount);
    expect(audit.length).toBeGreaterThanOrEqual(3);
    expect(audit[0]).toMatchObject({ route: 'run', source: 'upload', outcome: 'denied', error: 'GW_POLICY_FETCHED_ONLY', status: 403 });
  });

  it.each(['/v1/jobs', '/jobs', '/v1/jobs/', '//v1//jobs', '/v1/%6Aobs', '/v1/jobs%2F', '/v1/%256Aobs'])(
    'refuses POST %s (a job graph from flink run) without reaching the JobManager',
    async (path) => {
      const r = await json('POST', `${gw.url}${path}`, { jobGraphFileName: 'g.bin', jobJarFileNames: [], jobArtifactFileNames: [] });
      expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 403, code: 'GW_POLICY_FETCHED_ONLY' });
    },
  );

  it('runs a jar named by URI, and a jar id registered by POST /jars/fetch', async () => {
    const jobId = newJobId();
    const byUri = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      jobId,
      flinkConfiguration: { 'user.artifacts.job-jar': `${o.url}/releases/wordcount.jar` },
    });
    expect(byUri).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');

    const fetched = await json('POST', `${gw.url}/v1/jars/fetch`, { uri: `${o.url}/releases/wordcount.jar` });
    expect(fetched.status).toBe(200);
    const fetchedId = String(fetched.body.filename).split('/').pop()!;
    const second = newJobId();
    const byId = await json('POST', `${gw.url}/v1/jars/${fetchedId}/run`, { jobId: second });
    expect(byId).toMatchObject({ status: 200, body: { jobid: second } });
    expect(await waitForJobState(gw.url, second, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect((await json('DELETE', `${gw.url}/v1/jars/${fetchedId}`)).status).toBe(200);

    const runs = gw.audit().filter((a) => a.audit === 'submission' && a.outcome === 'accepted' && a.route === 'run');
    expect(runs.find((a) => a.jobId === jobId)).toMatchObject({ source: 'uri', verdicts: { policy: 'fetched-only: jar URI' } });
    expect(runs.find((a) => a.jobId === second)).toMatchObject({
      source: 'fetched',
      verdicts: { policy: 'fetched-only: jar registered by POST /jars/fetch' },
    });
  }, 120_000);
});

describe('fetched-only: what a request cannot add to a vetted jar', () => {
  let o: HttpOrigin;
  let gw: TestGateway;
  let placeholder: string;
  let trap: TrapListener;

  beforeAll(async () => {
    o = await origin();
    trap = await startTrapListener('127.0.0.1', WORDCOUNT);
    gw = await startGateway(flinkUrl(), { ...remoteJarOptions(o), 'gateway.policy.mode': 'fetched-only' }, [httpPlugin]);
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    placeholder = String(up.body.filename).split('/').pop()!;
  }, 60_000);

  afterAll(async () => {
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`).catch(() => undefined);
    await gw?.close();
    await o?.stop();
    await trap?.stop();
  });

  it('drops code-loading keys (pipeline.classpaths, classloader.*, python.*) and runs the vetted jar alone', async () => {
    const jobId = newJobId();
    const r = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      jobId,
      flinkConfiguration: {
        'user.artifacts.job-jar': `${o.url}/releases/wordcount.jar`,
        'pipeline.classpaths': `${trap.url}/evil.jar;file:///tmp/evil.jar`,
        'pipeline.jars': `${trap.url}/evil2.jar`,
        'classloader.parent-first-patterns.additional': 'dev.flinkjargateway.tokens.',
        'classloader.resolve-order': 'parent-first',
        'python.executable': '/bin/sh',
        'gateway.artifact.sha256': 'forged-provenance',
      },
    });
    expect(r).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect(trap.accepted).toBe(0);
    const audit = gw.audit().find((a) => a.audit === 'submission' && a.jobId === jobId);
    expect(String((audit?.verdicts as Record<string, string> | undefined)?.configuration)).toMatch(
      /^dropped .*pipeline\.classpaths.*classloader\.resolve-order/,
    );
  }, 120_000);

  it.each([
    ['org.apache.flink.client.cli.CliFrontend', 'body'],
    ['org.apache.flink.client.cli.CliFrontend', 'query'],
    ['java.lang.Runtime', 'body'],
    ['com.example.NotInTheJar', 'body'],
  ])("refuses entry class %s (in the %s) that is not the fetched jar's own, and the JobManager stays up", async (entryClass, where) => {
    const jobId = newJobId();
    const query = where === 'query' ? `?entry-class=${encodeURIComponent(entryClass)}` : '';
    const r = await json('POST', `${gw.url}/v1/jars/${placeholder}/run${query}`, {
      jobId,
      ...(where === 'body' ? { entryClass } : {}),
      flinkConfiguration: { 'user.artifacts.job-jar': `${o.url}/releases/wordcount.jar` },
    });
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 403, code: 'GW_POLICY_ENTRY_CLASS' });
    expect((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).status).toBe(404);
    expect((await json('GET', `${gw.url}/v1/overview`)).status).toBe(200);
  });

  it('holds a jar registered by POST /jars/fetch to the same rule, for runs and plans', async () => {
    const fetched = await json('POST', `${gw.url}/v1/jars/fetch`, { uri: `${o.url}/releases/wordcount.jar` });
    const id = String(fetched.body.filename).split('/').pop()!;
    try {
      const run = await json('POST', `${gw.url}/v1/jars/${id}/run`, { entryClass: 'org.apache.flink.client.cli.CliFrontend' });
      expect(errorCode(run)).toBe('GW_POLICY_ENTRY_CLASS');
      const plan = await json('GET', `${gw.url}/v1/jars/${id}/plan?entry-class=org.apache.flink.client.cli.CliFrontend`);
      expect(errorCode(plan)).toBe('GW_POLICY_ENTRY_CLASS');
      const ok = await json('POST', `${gw.url}/v1/jars/${id}/plan`, {
        entryClass: 'org.apache.flink.streaming.examples.wordcount.WordCount',
      });
      expect(ok.status).toBe(200);
    } finally {
      await json('DELETE', `${gw.url}/v1/jars/${id}`).catch(() => undefined);
    }
  });
});

describe('the embedded cluster intercepts System.exit from job code', () => {
  let gw: TestGateway;
  let wordcount: string;

  beforeAll(async () => {
    gw = await startGateway(flinkUrl(), {});
    const wc = await uploadBytes(gw.url, [{ name: 'WordCount.jar', bytes: WORDCOUNT }]);
    wordcount = String(wc.body.filename).split('/').pop()!;
  }, 60_000);

  afterAll(async () => {
    await json('DELETE', `${gw.url}/v1/jars/${wordcount}`).catch(() => undefined);
    await gw?.close();
  });

  it('an uploaded jar run with CliFrontend (whose main calls System.exit) fails alone; the cluster stays up', async () => {
    const r = await json('POST', `${gw.url}/v1/jars/${wordcount}/run`, { entryClass: 'org.apache.flink.client.cli.CliFrontend' });
    expect(r.status).toBeGreaterThanOrEqual(400);
    // Flink's envelope, the gateway's message first; Flink's own text follows verbatim (its server-side
    // stack trace included, as Flink itself answers), so the operator sees what Flink said.
    expect(Object.keys(r.body as object)).toEqual(['errors']);
    expect((r.body as { errors: string[] }).errors[0]).toMatch(/^GW_[A-Z_]+: /);
    await new Promise((res) => setTimeout(res, 1000));
    expect((await json('GET', `${gw.url}/v1/overview`)).status).toBe(200);
  });
});

describe('gateway.artifacts.allowed-uris', () => {
  let o: HttpOrigin;
  let gw: TestGateway;
  let placeholder: string;

  beforeAll(async () => {
    o = await origin();
    gw = await startGateway(
      flinkUrl(),
      { ...remoteJarOptions(o), 'gateway.artifacts.allowed-uris': `http://127.0.0.1:${o.port}/releases` },
      [httpPlugin],
    );
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    placeholder = String(up.body.filename).split('/').pop()!;
  }, 60_000);

  afterAll(async () => {
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`).catch(() => undefined);
    await gw?.close();
    await o?.stop();
  });

  const runByUri = (uri: string, jobId = newJobId()) =>
    json('POST', `${gw.url}/v1/jars/${placeholder}/run`, { jobId, flinkConfiguration: { 'user.artifacts.job-jar': uri } }).then((r) => ({
      ...r,
      jobId,
    }));

  it('runs a jar under the allowed prefix', async () => {
    const r = await runByUri(`${o.url}/releases/wordcount.jar`);
    expect(r.status).toBe(200);
    expect(await waitForJobState(gw.url, r.jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
  }, 90_000);

  it.each([
    ['a sibling prefix', '/releases-old/wordcount.jar'],
    ['another path', '/private/wordcount.jar'],
    ['an encoded dot segment', '/releases/%2e%2e%2fprivate/wordcount.jar'],
    ['an encoded slash and dot segment', '/releases/..%2Fprivate/wordcount.jar'],
  ])('refuses %s with 400 GW_FETCH_URI_NOT_ALLOWED before any request reaches the origin', async (_what, path) => {
    const before = o.requests.length;
    const r = await runByUri(`${o.url}${path}`);
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 400, code: 'GW_FETCH_URI_NOT_ALLOWED' });
    expect(String((r.body.errors as string[])[0])).toContain(`http://127.0.0.1:${o.port}/releases`);
    expect(o.requests.length).toBe(before);
    expect((await json('GET', `${gw.url}/v1/jobs/${r.jobId}`)).status).toBe(404);
  });

  it('refuses a redirect from an allowed path to a disallowed one, and never requests the target', async () => {
    const gw2 = await startGateway(
      flinkUrl(),
      { ...remoteJarOptions(o), 'gateway.artifacts.allowed-uris': `http://127.0.0.1:${o.port}/redirect/` },
      [httpPlugin],
    );
    try {
      const up = await uploadBytes(gw2.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
      const holder = String(up.body.filename).split('/').pop()!;
      const run = await json('POST', `${gw2.url}/v1/jars/${holder}/run`, {
        jobId: newJobId(),
        flinkConfiguration: { 'user.artifacts.job-jar': `${o.url}/redirect/1/private/wordcount.jar` },
      });
      expect({ status: run.status, code: errorCode(run) }).toEqual({ status: 400, code: 'GW_FETCH_URI_NOT_ALLOWED' });
      expect(String((run.body.errors as string[])[0])).toMatch(/redirected to http:\/\/127\.0\.0\.1:\d+\/private\/wordcount\.jar/);
      expect(o.requests.filter((q) => q.path === '/private/wordcount.jar')).toHaveLength(0);
      const fetchAudit = gw2.audit().find((a) => a.audit === 'fetch' && a.outcome === 'rejected');
      expect(fetchAudit).toMatchObject({ error: 'GW_FETCH_URI_NOT_ALLOWED', verdicts: { allowList: 'refused a redirect target' } });
      await json('DELETE', `${gw2.url}/v1/jars/${holder}`);
    } finally {
      await gw2.close();
    }
  });
});

describe('per-principal permissions and the audit log', () => {
  let o: HttpOrigin;
  let gw: TestGateway;
  let dir: string;
  let auditFile: string;
  let placeholder: string;
  const TOKENS = { ci: 'tok-ci-7f3a9c', viewer: 'tok-viewer-51d2', ops: 'tok-ops-0b8e' };

  beforeAll(async () => {
    o = await origin();
    dir = mkdtempSync(join(tmpdir(), 'gw-perm-'));
    writeFileSync(
      join(dir, 'tokens'),
      Object.entries(TOKENS)
        .map(([p, t]) => `${p} ${sha(t)}`)
        .join('\n'),
    );
    auditFile = join(dir, 'audit', 'audit.jsonl');
    gw = await startGateway(
      flinkUrl(),
      {
        ...remoteJarOptions(o),
        'gateway.auth.tokens-file': join(dir, 'tokens'),
        'gateway.auth.permission.read': 'token:ci;token:viewer;token:ops',
        'gateway.auth.permission.submit': 'token:ci',
        'gateway.auth.permission.cancel': 'token:ops',
        'gateway.audit.log': auditFile,
      },
      [httpPlugin],
    );
    const up = await uploadBytes(
      gw.url,
      [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }],
      { request: '{}' },
      bearer(TOKENS.ci),
    );
    expect(up.status).toBe(200);
    placeholder = String(up.body.filename).split('/').pop()!;
  }, 60_000);

  afterAll(async () => {
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`, undefined, bearer(TOKENS.ci)).catch(() => undefined);
    await gw?.close();
    await o?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a reader reads but may not submit (403 GW_AUTH_FORBIDDEN naming the principal and the key), even through an encoded path', async () => {
    expect((await json('GET', `${gw.url}/v1/jobs/overview`, undefined, bearer(TOKENS.viewer))).status).toBe(200);
    expect((await json('GET', `${gw.url}/gateway/v1/health`)).status).toBe(200);
    for (const path of [`/v1/jars/${placeholder}/run`, `/v1/%6Aars/${placeholder}/run`]) {
      const r = await json(
        'POST',
        `${gw.url}${path}`,
        { flinkConfiguration: { 'user.artifacts.job-jar': `${o.url}/releases/wordcount.jar` } },
        bearer(TOKENS.viewer),
      );
      expect({ path, status: r.status, code: errorCode(r) }).toEqual({ path, status: 403, code: 'GW_AUTH_FORBIDDEN' });
      expect(String((r.body.errors as string[])[0])).toMatch(/token:viewer may not submit .*gateway\.auth\.permission\.submit/);
    }
    const plan = await json('GET', `${gw.url}/v1/jars/${placeholder}/plan`, undefined, bearer(TOKENS.viewer));
    expect(plan.status).toBe(403);
    expect(o.requests.length).toBe(0);
    // Refusals are counted by code, for alerting on probing.
    const metrics = await fetch(`${gw.url}/gateway/v1/metrics`, { headers: bearer(TOKENS.viewer) }).then((r) => r.text());
    expect(Number(/flink_gateway_errors_total\{code="GW_AUTH_FORBIDDEN",status="403"\} (\d+)/.exec(metrics)?.[1])).toBeGreaterThanOrEqual(
      3,
    );
  });

  it('the submitter runs by URI but may not cancel; the operator cancels; the audit log has one line per submission and fetch', async () => {
    const jobId = newJobId();
    const uri = `${o.url}/releases/wordcount.jar`;
    const r = await json(
      'POST',
      `${gw.url}/v1/jars/${placeholder}/run`,
      { jobId, flinkConfiguration: { 'user.artifacts.job-jar': `${uri}?sig=SECRET-SIG-123` } },
      bearer(TOKENS.ci),
    );
    expect(r).toMatchObject({ status: 200, body: { jobid: jobId } });
    const cancelByCi = await json('PATCH', `${gw.url}/v1/jobs/${jobId}?mode=cancel`, undefined, bearer(TOKENS.ci));
    expect({ status: cancelByCi.status, code: errorCode(cancelByCi) }).toEqual({ status: 403, code: 'GW_AUTH_FORBIDDEN' });
    const yarnCancel = await json('GET', `${gw.url}/jobs/${jobId}/yarn-cancel`, undefined, bearer(TOKENS.viewer));
    expect(yarnCancel.status).toBe(403);
    const state = await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'RUNNING'], 90_000, bearer(TOKENS.viewer));
    if (state === 'RUNNING')
      expect((await json('PATCH', `${gw.url}/v1/jobs/${jobId}?mode=cancel`, undefined, bearer(TOKENS.ops))).status).toBe(202);
    await waitForJobState(gw.url, jobId, ['FINISHED', 'CANCELED', 'FAILED'], 90_000, bearer(TOKENS.viewer));

    const lines = readFileSync(auditFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const fetch = lines.find((l) => l.audit === 'fetch' && l.jobId === jobId)!;
    expect(fetch).toMatchObject({
      principal: 'token:ci',
      uri, // redacted: the query string with its signature is gone
      sha256: sha(WORDCOUNT),
      size: WORDCOUNT.length,
      etag: expect.stringMatching(/^"?[0-9a-f]{40}"?$/),
      outcome: 'fetched',
      verdicts: { scheme: 'allowed', allowList: 'not configured', connect: 'checked', pin: 'none', zip: 'ok' },
    });
    const run = lines.find((l) => l.audit === 'submission' && l.jobId === jobId)!;
    expect(run).toMatchObject({
      principal: 'token:ci',
      route: 'run',
      source: 'uri',
      uri,
      sha256: sha(WORDCOUNT),
      outcome: 'accepted',
      status: 200,
      verdicts: { permission: 'submit: token:ci', policy: 'open' },
    });
    expect(typeof run.durationMs).toBe('number');
    expect(typeof run.time).toBe('string');
    const controls = lines.filter((l) => l.audit === 'control' && l.jobId === jobId);
    expect(controls.find((l) => l.principal === 'token:ci')).toMatchObject({
      method: 'PATCH',
      path: `/v1/jobs/${jobId}`,
      outcome: 'denied',
      status: 403,
    });
    expect(controls.find((l) => l.principal === 'token:viewer')).toMatchObject({
      method: 'GET',
      path: `/jobs/${jobId}/yarn-cancel`,
      outcome: 'denied',
    });
    if (state === 'RUNNING')
      expect(controls.find((l) => l.principal === 'token:ops')).toMatchObject({
        outcome: 'accepted',
        status: 202,
        verdicts: { permission: 'cancel: token:ops' },
      });
    const denied = lines.filter((l) => l.outcome === 'denied' && l.principal === 'token:viewer');
    expect(denied.length).toBeGreaterThanOrEqual(2);
    const text = readFileSync(auditFile, 'utf8');
    for (const secret of [...Object.values(TOKENS), 'SECRET-SIG-123']) expect(text).not.toContain(secret);
    expect(statSync(auditFile).mode & 0o777).toBe(0o600);
    await cancelQuietly(gw.url, jobId, bearer(TOKENS.ops));
  }, 120_000);

  it('refuses to start when permissions name principals but authentication is off', async () => {
    await expect(startGateway(flinkUrl(), { 'gateway.auth.permission.submit': 'token:ci' })).rejects.toThrow(
      /no authentication is configured/,
    );
    await expect(
      startGateway(flinkUrl(), { 'gateway.auth.tokens-file': join(dir, 'tokens'), 'gateway.auth.permission.cancel': 'ops' }),
    ).rejects.toThrow(/'ops' is not a principal/);
  });
});
