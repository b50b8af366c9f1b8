import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobRefusedError } from '../../src/plugin-kit/registration-error';
import type { DelegationTokenProvider, JobConfiguration, JobContext } from '../../src/plugin-kit/token-spi';
import { json, newJobId, uploadFile, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { runFlinkCli } from '../helpers/java-client';
import { assertMatchesSpec } from '../helpers/openapi';
import { projectRoot } from '../../src/project-root';

const TEST_JOB_JAR = join(projectRoot(__dirname), 'embedded-flink', 'target', 'test-jars', 'GatewayTestJob.jar');

/**
 * docs/adr/0010: every job that runs on the cluster is registered with the delegation-token
 * providers or its submission path refused — jobs from `flink run` (POST /v1/jobs, Flink's own CLI
 * here) and jobs already running when a gateway starts with an empty registration store.
 */
class RecordingProvider implements DelegationTokenProvider {
  readonly serviceName = 'e2e-unregistered';
  readonly jobRequestKeys = ['security.delegation.job.e2e-unregistered.scope'];
  readonly registered: { jobId: string; conf: JobConfiguration; principal: string }[] = [];
  readonly unregistered: string[] = [];
  /** A scope this provider refuses (a JobRefusedError, as a real provider's allow-list would). */
  refuse?: string;
  onRegister?: (jobId: string) => Promise<void>;
  init(): void {}
  delegationTokensRequired(): boolean {
    return false;
  }
  async obtainDelegationTokens(): Promise<{ tokens: Uint8Array }> {
    return { tokens: new Uint8Array() };
  }
  async registerJob(jobId: string, conf: JobConfiguration, context: JobContext): Promise<void> {
    if (this.refuse && conf['security.delegation.job.e2e-unregistered.scope'] === this.refuse)
      throw new JobRefusedError(`scope ${this.refuse} is not allowed`);
    await this.onRegister?.(jobId);
    this.registered.push({ jobId, conf, principal: context.principal });
  }
  unregisterJob(jobId: string): void {
    this.unregistered.push(jobId);
  }
}

async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await check();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

describe('jobs the gateway did not register, on the real embedded Flink cluster', () => {
  let dir: string;
  let gw: TestGateway | undefined;
  const toCancel = new Set<string>();

  const start = (policy: string, provider: RecordingProvider, interval = '200 ms') =>
    startGateway(
      flinkUrl(),
      {
        'gateway.tokens.store-dir': join(dir, 'store'),
        'gateway.tokens.watcher.interval': interval,
        'gateway.tokens.unregistered-jobs': policy,
        'gateway.tokens.cluster-default-configuration': 'security.delegation.job.e2e-unregistered.scope:read-only',
      },
      [],
      { providers: [provider], receivers: [{ serviceName: provider.serviceName, init() {}, onNewTokensObtained() {} }] },
    );

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-e2e-unregistered-'));
  });
  afterEach(async () => {
    for (const jobId of toCancel) {
      await json('PATCH', `${flinkUrl()}/v1/jobs/${jobId}?mode=cancel`).catch(() => undefined);
      await waitForJobState(flinkUrl(), jobId, ['CANCELED', 'FINISHED', 'FAILED']).catch(() => undefined);
    }
    toCancel.clear();
    await gw?.close();
    gw = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  const cli = (url: string, extra: Record<string, string> = {}) => {
    const { hostname, port } = new URL(url);
    const confDir = mkdtempSync(join(dir, 'conf-'));
    // The project's bounded WordCount: only Flink's core and DataStream classes, which the CLI's class path has.
    return runFlinkCli(
      ['run', '-d', '-c', 'dev.flinkjargateway.testjobs.WordCount', TEST_JOB_JAR],
      { 'rest.address': hostname, 'rest.port': port, 'parallelism.default': '1', ...extra },
      confDir,
    );
  };

  it("flink run (POST /v1/jobs): the job is registered with its job graph's own configuration before the JobManager gets the graph", async () => {
    const provider = new RecordingProvider();
    gw = await start('register', provider);
    // Flink's CLI puts $internal.pipeline.job-id into the job graph (the cancel case below relies on it).
    const fixed = newJobId();
    let listedAtRegistration: number | undefined;
    provider.onRegister = async (jobId) => {
      if (jobId === fixed) listedAtRegistration = (await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`)).status;
    };
    const r = await cli(gw.url, {
      '$internal.pipeline.job-id': fixed,
      'security.delegation.job.e2e-unregistered.scope': 'team-a',
      'my.job.key': 'mine',
    });
    expect({ status: r.status, stderr: r.stderr.slice(-2000) }).toMatchObject({ status: 0 });
    const jobId = /JobID ([0-9a-f]{32})/.exec(r.stdout)?.[1];
    expect(jobId).toBe(fixed);
    // Registered once, for the caller, with the graph's own keys (not the cluster default scope) …
    const mine = provider.registered.filter((x) => x.jobId === jobId);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.principal).toBe('anonymous');
    expect(mine[0]!.conf).toMatchObject({
      'security.delegation.job.e2e-unregistered.scope': 'team-a',
      'my.job.key': 'mine',
      'parallelism.default': '1',
    });
    // … while the JobManager did not have the job yet.
    expect(listedAtRegistration).toBe(404);
    const audit = gw.audit().filter((a) => a.jobId === jobId || a.route === 'job-graph');
    expect(audit.map((a) => [a.audit, a.action ?? a.outcome])).toEqual([
      ['job', 'registered'],
      ['submission', 'accepted'],
    ]);
    expect(audit[0]).toMatchObject({ source: 'job-graph', submittedBy: 'anonymous', principal: 'anonymous', policy: 'register' });
    // A bounded WordCount may have finished already; either way the status said how it was registered.
    const status = await json('GET', `${gw.url}/gateway/v1/tokens`);
    assertMatchesSpec('GET', '/gateway/v1/tokens', status);
    const listed = (status.body.jobs as { jobId: string }[]).find((j) => j.jobId === jobId);
    if (listed) expect(listed).toMatchObject({ source: 'job-graph', principal: 'anonymous' });
    expect(await waitForJobState(gw.url, jobId!, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
    await eventually(() => (provider.unregistered.includes(jobId!) ? true : undefined), 'the watcher to unregister the finished job');
  });

  it('flink run whose job graph asks for what a provider refuses: 400 GW_TOKENS_REJECTED, and the job never exists', async () => {
    const provider = new RecordingProvider();
    provider.refuse = 'forbidden-scope';
    gw = await start('register', provider);
    const jobId = newJobId();
    const r = await cli(gw.url, {
      '$internal.pipeline.job-id': jobId,
      'security.delegation.job.e2e-unregistered.scope': 'forbidden-scope',
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('GW_TOKENS_REJECTED');
    expect((await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`)).status).toBe(404);
    expect(provider.registered.filter((x) => x.jobId === jobId)).toEqual([]);
  });

  it('a POST /v1/jobs whose job graph cannot be read is 400 GW_JOB_GRAPH_UNREADABLE; the JobManager never gets it whole', async () => {
    const provider = new RecordingProvider();
    gw = await start('register', provider);
    const jobId = newJobId();
    // A Java-serialised java.util.Date where the graph should be: read, never loaded.
    const date = Buffer.from('aced00057372000e6a6176612e7574696c2e44617465686a81014b5974190300007870770800000000000000007878', 'hex');
    const form = new FormData();
    form.append('request', JSON.stringify({ jobGraphFileName: 'graph.bin', jobJarFileNames: [], jobArtifactFileNames: [] }));
    form.append('file_0', new Blob([date]), 'graph.bin');
    const res = await fetch(`${gw.url}/v1/jobs`, { method: 'POST', body: form });
    const body = (await res.json()) as { errors: string[] };
    expect(res.status).toBe(400);
    expect(body.errors[0]).toMatch(/^GW_JOB_GRAPH_UNREADABLE: .*java\.util\.Date, not a Flink JobGraph/);
    expect(provider.registered).toEqual([]);
    expect((await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`)).status).toBe(404);
  });

  it('flink run under gateway.tokens.unregistered-jobs: cancel is refused with 403 GW_POLICY_UNREGISTERED_JOBS; nothing runs', async () => {
    const provider = new RecordingProvider();
    // A long interval: this gateway must not cancel other suites' jobs on the shared cluster.
    gw = await start('cancel', provider, '1 h');
    // A fixed job id (Flink's $internal.pipeline.job-id, which the CLI puts into the job graph), so
    // the check below sees this submission only, whatever the suites sharing the cluster run.
    const jobId = newJobId();
    const r = await cli(gw.url, { '$internal.pipeline.job-id': jobId });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('GW_POLICY_UNREGISTERED_JOBS');
    expect(r.stderr).toContain('gateway.tokens.unregistered-jobs: cancel');
    // Flink's client retries a submission whose upload was cut short (the refusal comes before the
    // body is read, and the connection is then closed), so there may be several attempts: all refused.
    const denied = gw.audit().filter((a) => a.route === 'job-graph');
    expect(denied.length).toBeGreaterThanOrEqual(1);
    for (const d of denied) expect(d).toMatchObject({ outcome: 'denied', status: 403, error: 'GW_POLICY_UNREGISTERED_JOBS' });
    expect((await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`)).status).toBe(404);
    expect(provider.registered).toEqual([]);
  });

  it('a job running when a gateway starts with an empty registration store is discovered and registered', async () => {
    // Submitted past any gateway (as a lost store, or the SQL gateway talking to the JobManager, leaves it).
    const input = join(dir, 'input');
    rmSync(input, { recursive: true, force: true });
    mkdirSync(input);
    writeFileSync(join(input, 'words.txt'), 'to be or not to be\n');
    const jarId = String((await uploadFile(flinkUrl(), WORDCOUNT_JAR, 'WordCount.jar')).body.filename)
      .split('/')
      .pop()!;
    const jobId = newJobId();
    const run = await json('POST', `${flinkUrl()}/v1/jars/${jarId}/run`, {
      jobId,
      programArgsList: ['--input', input, '--discovery-interval', '1s'],
      flinkConfiguration: { 'parallelism.default': '1' },
    });
    expect(run.status).toBe(200);
    toCancel.add(jobId);
    expect(await waitForJobState(flinkUrl(), jobId, ['RUNNING', 'FINISHED', 'FAILED'])).toBe('RUNNING');

    const provider = new RecordingProvider();
    gw = await start('register', provider);
    const mine = await eventually(() => provider.registered.find((x) => x.jobId === jobId), 'the watcher to discover the running job');
    expect(mine).toEqual({
      jobId,
      conf: { 'security.delegation.job.e2e-unregistered.scope': 'read-only' },
      principal: 'gateway:cluster-default',
    });
    const status = await json('GET', `${gw.url}/gateway/v1/tokens`);
    assertMatchesSpec('GET', '/gateway/v1/tokens', status);
    expect((status.body.jobs as { jobId: string }[]).find((j) => j.jobId === jobId)).toMatchObject({
      source: 'discovered',
      principal: 'gateway:cluster-default',
    });
    // The audit record follows the store write and goes through the audit file's async stream: it
    // may land after the provider and the status already show the job.
    const running = gw;
    const audited = await eventually(() => {
      const lines = running.audit().filter((a) => a.audit === 'job' && a.jobId === jobId);
      return lines.length > 0 ? lines : undefined;
    }, 'the audit record of the discovered job');
    expect(audited).toEqual([expect.objectContaining({ source: 'discovered', action: 'registered', state: 'RUNNING' })]);

    expect((await json('PATCH', `${gw.url}/v1/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    expect(await waitForJobState(gw.url, jobId, ['CANCELED'])).toBe('CANCELED');
    toCancel.delete(jobId);
    await eventually(() => (provider.unregistered.includes(jobId) ? true : undefined), 'the watcher to unregister the cancelled job');
    await json('DELETE', `${flinkUrl()}/jars/${jarId}`);
  });
});
