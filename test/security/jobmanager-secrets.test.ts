import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FormData, request } from 'undici';
import { builtinPlugins } from '../../fs-plugins';
import type { StandaloneCluster } from '../../src/cluster/standalone-cluster';
import { createRegistry } from '../../src/composition';
import { newJobId, waitForJobState, WORDCOUNT_CLASS } from '../helpers/flink';
import { startDistCluster, wordCountJarFor } from '../helpers/flink-dist';
import { startGateway, type TestGateway, writeTokensFile } from '../helpers/gateway';
import { type RecordingRelay, startRecordingRelay } from '../servers/recording-relay';

const hex = (n: number) => randomBytes(n).toString('hex');
/** The version whose distribution the suite starts (separate JobManager and TaskManager processes, with log files). */
const VERSION = process.env.SECRETS_FLINK_VERSION ?? '2.1.3';

/**
 * A canary value under every key the gateway declares sensitive (templates instantiated), under
 * keys only its name heuristic or only Flink's word list hides, inside JVM options as a -D property,
 * and in a job's user configuration. Values are base64-safe (an account key's check) and unique.
 */
function canaryConfiguration(): { config: Record<string, string>; canaries: Map<string, string> } {
  const canaries = new Map<string, string>();
  const config: Record<string, string> = {};
  let n = 0;
  const canary = (where: string) => {
    const value = `canary${String(n++).padStart(2, '0')}${hex(12)}`;
    canaries.set(value, where);
    return value;
  };
  const registry = createRegistry(builtinPlugins);
  for (const def of registry.all().filter((d) => d.sensitive)) {
    let i = 0;
    const key = def.key.replace(/<[^>]+>/g, () => `canaryname${i++}`);
    const value = canary(key);
    config[key] = def.type === 'map' ? `X-Canary:${value}` : value;
  }
  // Keys the registry does not declare: the name heuristic, and Flink's own list.
  for (const key of ['fs.s3a.access.key', 'fs.gs.auth.service.account.private.key', 'custom.connector.password', 'some.service.api-key']) {
    if (!(key in config)) config[key] = canary(key);
  }
  // A secret as a -D property of the JVMs (their options are listed by /jobmanager/environment and logged at start).
  const jvm = canary('-Dfs.azure.sas.jvm.acct.blob.core.windows.net (env.java.opts)');
  config['env.java.opts.jobmanager'] = `-Dfs.azure.sas.jvm.acct.blob.core.windows.net=${jvm}`;
  config['env.java.opts.taskmanager'] = `-Dfs.azure.sas.jvm.acct.blob.core.windows.net=${jvm}`;
  // What the rules across options need next to the secrets (an account name with its key).
  config['security.delegation.token.provider.azure-blob.account-name'] = 'canaryaccount';
  config['gateway.artifacts.http-headers.hosts'] = 'canary.example.com';
  config['security.delegation.token.provider.oauth2.token-endpoint'] = 'https://canary.example.com/token';
  config['security.delegation.token.provider.oauth2.client-id'] = 'canary-client';
  // The routes exist (they are off by default): their answers are probed too.
  config['rest.profiling.enabled'] = 'true';
  config['rest.flamegraph.enabled'] = 'true';
  return { config, canaries };
}

const TOKENS = { viewer: `viewer-${hex(16)}`, ops: `ops-${hex(16)}` };
/** Credentials a caller sends with every request: none may reach the JobManager. */
const CALLER = {
  cookie: `session=cookie-${hex(12)}`,
  'proxy-authorization': `Basic proxy-${hex(12)}`,
  'x-forwarded-client-cert': `Hash=xfcc-${hex(12)};Subject="CN=ops"`,
  'x-ssl-client-cert': `sslcert-${hex(12)}`,
  'x-ssl-client-s-dn': `CN=dn-${hex(12)}`,
};
const CREDENTIAL_VALUES = [...Object.values(TOKENS), ...Object.values(CALLER).map((v) => v.match(/[a-z]+-[0-9a-f]{24}/)![0])];
const CREDENTIAL_HEADERS = [
  'authorization',
  'cookie',
  'proxy-authorization',
  'x-forwarded-client-cert',
  'x-ssl-client-cert',
  'x-ssl-client-s-dn',
];

/**
 * What a `read` principal (a dashboard token) can learn of the cluster's secrets through the
 * JobManager's answers, on Flink's own distribution started with canaries under every sensitive
 * key of its configuration — the file the gateway reads too (`gateway.cluster.flink-conf`):
 * every configuration route, in several spellings and with compression asked for, answers with 0
 * canaries; every log route is refused without gateway.auth.permission.logs. A recording relay
 * between the gateway and the JobManager checks every header of every request the gateway sends
 * upstream (pass-through, uploads, runs, plans, deletes, the gateway's own calls): 0 credentials.
 * The figures are printed (routes probed, canaries found).
 */
describe(`secrets in the JobManager's answers (Flink ${VERSION} distribution)`, () => {
  const { config: clusterConfig, canaries } = canaryConfiguration();
  let cluster: StandaloneCluster;
  let relay: RecordingRelay;
  let gw: TestGateway;
  let dir: string;
  const figures: { route: string; principal: string; status: number; canaries: string[] }[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-jm-secrets-'));
    cluster = await startDistCluster(VERSION, { flinkConfig: clusterConfig, taskManagers: 1, slots: 2 });
    relay = await startRecordingRelay(cluster.restUrl);
    gw = await startGateway(
      relay.url,
      {
        'gateway.cluster.flink-conf': cluster.confDir,
        'gateway.auth.tokens-file': writeTokensFile(join(dir, 'tokens'), { viewer: TOKENS.viewer, ops: TOKENS.ops }),
        'gateway.auth.permission.submit': 'token:ops',
        'gateway.auth.permission.cancel': 'token:ops',
        'gateway.auth.permission.logs': 'token:ops',
      },
      builtinPlugins,
    );
  }, 300_000);

  afterAll(async () => {
    await gw?.close();
    await relay?.stop();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (figures.length > 0) {
      const probed = figures.filter((f) => f.principal === 'viewer');
      const found = probed.reduce((sum, f) => sum + f.canaries.length, 0);
      process.stderr.write(
        `\njobmanager-secrets (Flink ${VERSION}): ${probed.length} route spellings probed as a read principal, ${found} canaries found; ` +
          `${figures.filter((f) => f.principal === 'ops').reduce((s, f) => s + f.canaries.length, 0)} in what a logs principal reads; ${relay?.requests.length ?? 0} requests relayed upstream\n` +
          probed
            .filter((f) => f.canaries.length > 0)
            .map((f) => `  ${f.status} ${f.route}: ${f.canaries.join(', ')}\n`)
            .join(''),
      );
    }
  });

  const call = async (
    method: string,
    path: string,
    who: 'viewer' | 'ops',
    opts: { body?: unknown; headers?: Record<string, string> } = {},
  ) => {
    const res = await request(`${gw.url}${path}`, {
      method: method as 'GET',
      headers: {
        authorization: `Bearer ${TOKENS[who]}`,
        ...CALLER,
        ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...opts.headers,
      },
      ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    });
    const text = await res.body.text();
    return { status: res.statusCode, text };
  };
  const found = (text: string) => [...canaries].filter(([value]) => text.includes(value)).map(([, where]) => where);
  const probe = async (path: string, who: 'viewer' | 'ops', headers: Record<string, string> = {}) => {
    const r = await call('GET', path, who, { headers });
    figures.push({ route: path, principal: who, status: r.status, canaries: found(r.text) });
    return r;
  };

  let jobId: string;
  let vertexId: string;
  let tmId: string;
  let jmLogs: string[];
  let tmLogs: string[];
  /** Flink 2.3's applications (a run makes one): their configuration route is probed too. */
  let applicationIds: string[] = [];

  it("runs a job through the gateway (upload, plan, run, delete) with the caller's credentials on every request", async () => {
    const form = new FormData();
    form.append('jarfile', new Blob([readFileSync(wordCountJarFor(VERSION))]), 'WordCount.jar');
    const up = await request(`${gw.url}/v1/jars/upload`, {
      method: 'POST',
      body: form,
      headers: { authorization: `Bearer ${TOKENS.ops}`, ...CALLER },
    });
    const upBody = (await up.body.json()) as { filename: string };
    expect(up.statusCode).toBe(200);
    const jarId = upBody.filename.split('/').pop()!;
    expect((await call('GET', '/v1/jars', 'ops')).status).toBe(200);
    expect((await call('POST', `/v1/jars/${jarId}/plan`, 'ops', { body: { entryClass: WORDCOUNT_CLASS } })).status).toBe(200);
    jobId = newJobId();
    const userSecret = [...canaries].find(([, where]) => where === 'custom.connector.password')![0];
    const run = await call('POST', `/v1/jars/${jarId}/run`, 'ops', {
      body: {
        entryClass: WORDCOUNT_CLASS,
        jobId,
        programArgsList: ['--db.password', userSecret],
        flinkConfiguration: { 'pipeline.global-job-parameters': `api.token:${userSecret}` },
      },
    });
    expect(run.status).toBe(200);
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'], 120_000, { authorization: `Bearer ${TOKENS.ops}` })).toBe(
      'FINISHED',
    );
    expect((await call('DELETE', `/v1/jars/${jarId}`, 'ops')).status).toBe(200);
    const job = JSON.parse((await call('GET', `/v1/jobs/${jobId}`, 'viewer')).text) as { vertices: { id: string }[] };
    vertexId = job.vertices[0]!.id;
    tmId = (JSON.parse((await call('GET', '/v1/taskmanagers', 'viewer')).text) as { taskmanagers: { id: string }[] }).taskmanagers[0]!.id;
    jmLogs = (JSON.parse((await call('GET', '/v1/jobmanager/logs', 'ops')).text) as { logs: { name: string }[] }).logs.map((l) => l.name);
    tmLogs = (
      JSON.parse((await call('GET', `/v1/taskmanagers/${encodeURIComponent(tmId)}/logs`, 'ops')).text) as { logs: { name: string }[] }
    ).logs.map((l) => l.name);
    expect(jmLogs.length).toBeGreaterThan(0);
    const apps = await call('GET', '/v1/applications/overview', 'viewer');
    if (apps.status === 200) applicationIds = (JSON.parse(apps.text) as { applications: { id: string }[] }).applications.map((a) => a.id);
    if (VERSION.startsWith('2.3')) expect(applicationIds.length).toBeGreaterThan(0);
  }, 300_000);

  it('every configuration route answers a read principal with 0 canaries, in every spelling, compression asked or not', async () => {
    const routes = [
      '/jobmanager/config',
      '/v1/jobmanager/config',
      '//v1//jobmanager/config/',
      '/v1/jobmanager/%63onfig',
      '/%76%31/jobmanager/%2563onfig',
      `/jobs/${jobId}/jobmanager/config`,
      `/v1/jobs/${jobId}/jobmanager/config`,
      `/jobs/${jobId}/config`,
      `/v1/jobs/${jobId}/config`,
      `/v1/jobs/${jobId}/checkpoints/config`,
      '/jobmanager/environment',
      '/v1/jobmanager/environment',
      `/v1/jobs/${jobId}/jobmanager/environment`,
      `/v1/taskmanagers/${encodeURIComponent(tmId)}`,
      ...applicationIds.flatMap((id) => [`/applications/${id}/jobmanager/config`, `/v1/applications/${id}/jobmanager/config`]),
    ];
    const statuses: Record<string, number> = {};
    const leaks: string[] = [];
    for (const route of routes) {
      for (const headers of [{}, { 'accept-encoding': 'gzip, deflate, br' }] as Record<string, string>[]) {
        const r = await probe(route, 'viewer', headers);
        statuses[route] = r.status;
        for (const where of found(r.text)) leaks.push(`${route}: ${where}`);
      }
    }
    expect(leaks).toEqual([]);
    // The listings are there (only their secrets are hidden); Flink's router does not route the '//' spelling (404).
    for (const route of routes.filter((r) => !r.startsWith('//')))
      expect({ route, status: statuses[route] }).toEqual({ route, status: 200 });
    const listing = JSON.parse((await probe('/v1/jobmanager/config', 'ops')).text) as { key: string; value: string }[];
    expect(listing.find((e) => e.key === 'rest.profiling.enabled')?.value).toBe('true');
    for (const key of Object.keys(clusterConfig).filter(
      (k) => canaries.has(clusterConfig[k]!) || clusterConfig[k]!.startsWith('X-Canary:'),
    )) {
      expect({ key, value: listing.find((e) => e.key === key)?.value }).toEqual({ key, value: '******' });
    }
  });

  it('every log, stdout, thread-dump, profiler and flame-graph route is refused to a read principal (and is what a logs principal reads)', async () => {
    const tm = encodeURIComponent(tmId);
    const routes = [
      '/jobmanager/log',
      '/v1/jobmanager/log',
      '/v1/jobmanager/%6Cog',
      '/jobmanager/stdout',
      '/v1/jobmanager/stdout',
      '/v1/jobmanager/logs',
      ...jmLogs.map((name) => `/v1/jobmanager/logs/${encodeURIComponent(name)}`),
      '/v1/jobmanager/thread-dump',
      '/v1/jobmanager/profiler',
      `/taskmanagers/${tm}/log`,
      `/v1/taskmanagers/${tm}/log`,
      `/v1/taskmanagers/${tm}/stdout`,
      `/v1/taskmanagers/${tm}/logs`,
      ...tmLogs.map((name) => `/v1/taskmanagers/${tm}/logs/${encodeURIComponent(name)}`),
      `/v1/taskmanagers/${tm}/thread-dump`,
      `/v1/taskmanagers/${tm}/profiler`,
      `/v1/jobs/${jobId}/vertices/${vertexId}/flamegraph`,
    ];
    const served: string[] = [];
    for (const route of routes) {
      const r = await probe(route, 'viewer');
      if (r.status !== 403 || !/GW_AUTH_FORBIDDEN: token:viewer may not logs/.test(r.text))
        served.push(`${r.status} ${route} (${found(r.text).length} canaries)`);
    }
    expect(served).toEqual([]);
    // What the permission guards: the JobManager's log prints the start-up configuration, redacted by Flink's list only.
    const log = await probe('/v1/jobmanager/log', 'ops');
    expect(log.status).toBe(200);
    for (const route of routes.slice(1)) await probe(route, 'ops');
  });

  it('no credential of a caller reached the JobManager: every header of every relayed request', () => {
    expect(relay.requests.length).toBeGreaterThan(20);
    const methods = new Set(
      relay.requests.map((r) => `${r.method} ${r.url.split('?')[0]!.replace(/[0-9a-f]{32}|[0-9a-f-]{36}_[^/]+/g, ':id')}`),
    );
    // The gateway's own calls (upload, plan, run, delete) and passed-through ones are all there.
    expect([...methods]).toEqual(
      expect.arrayContaining(['POST /v1/jars/upload', 'POST /v1/jars/:id/run', 'DELETE /v1/jars/:id', 'GET /v1/jobmanager/log']),
    );
    const offending = relay.requests.flatMap((r) => {
      const problems: string[] = [];
      for (let i = 0; i < r.rawHeaders.length; i += 2) {
        const name = r.rawHeaders[i]!.toLowerCase();
        const value = r.rawHeaders[i + 1]!;
        if (CREDENTIAL_HEADERS.includes(name)) problems.push(`${r.method} ${r.url}: header ${name}`);
        for (const secret of CREDENTIAL_VALUES)
          if (value.includes(secret)) problems.push(`${r.method} ${r.url}: ${name} carries a credential`);
      }
      return problems;
    });
    process.stderr.write(
      `jobmanager-secrets: ${relay.requests.length} requests relayed upstream, ${offending.length} credentials in their headers\n`,
    );
    expect(offending).toEqual([]);
  });
});
