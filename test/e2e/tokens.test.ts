import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { coreOptions } from '../../src/config/options';
import type {
  DelegationTokenManagerCallback,
  DelegationTokenProvider,
  DelegationTokenReceiver,
  JobConfiguration,
  ObtainedDelegationTokens,
} from '../../src/plugin-kit/token-spi';
import { json, newJobId, uploadFile, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { assertMatchesSpec } from '../helpers/openapi';
import { JobRefusedError } from '../../src/plugin-kit/registration-error';

/**
 * A provider written against the SPI the way a third party would: it keeps per-job state, asks for
 * a re-obtain after recording a job, and refuses jobs that set `test.reject-job: true`. (Not
 * `test.tokens.reject`: providers get the job configuration without sensitive keys, and any key
 * containing "token" counts as sensitive by name.)
 */
class TestTokenProvider implements DelegationTokenProvider {
  readonly serviceName = 'e2e-tokens';
  constructor(readonly jobRequestKeys: readonly string[] = []) {}
  readonly registered: { jobId: string; conf: JobConfiguration }[] = [];
  readonly unregistered: string[] = [];
  readonly jobs = new Set<string>();
  private callback: DelegationTokenManagerCallback | undefined;

  init(_config: unknown, callback: DelegationTokenManagerCallback): void {
    this.callback = callback;
  }

  delegationTokensRequired(): boolean {
    return true;
  }

  async obtainDelegationTokens(): Promise<ObtainedDelegationTokens> {
    const payload = { jobs: Object.fromEntries([...this.jobs].map((j) => [j, `E2E-SECRET-${j}`])) };
    return { tokens: new Uint8Array(Buffer.from(JSON.stringify(payload))), validUntil: Date.now() + 3_600_000 };
  }

  registerJob(jobId: string, conf: JobConfiguration): void {
    this.registered.push({ jobId, conf });
    if (conf['test.reject-job'] === 'true') throw new JobRefusedError('test.reject-job is set, so this job gets no tokens');
    this.jobs.add(jobId);
    this.callback?.reobtainDelegationTokens();
  }

  unregisterJob(jobId: string): void {
    this.unregistered.push(jobId);
    this.jobs.delete(jobId);
  }
}

class TestTokenReceiver implements DelegationTokenReceiver {
  readonly serviceName = 'e2e-tokens';
  latest: { jobs: Record<string, string> } | undefined;
  init(): void {}
  onNewTokensObtained(tokens: Uint8Array): void {
    this.latest = JSON.parse(Buffer.from(tokens).toString('utf8')) as { jobs: Record<string, string> };
  }
}

async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

describe('delegation tokens on the real embedded Flink cluster', () => {
  let storeDir: string;
  let inputDir: string;
  const gateways: TestGateway[] = [];
  const jobsToCancel = new Set<string>();

  const start = async (provider: TestTokenProvider, receiver = new TestTokenReceiver(), extra: Record<string, string> = {}) => {
    const gw = await startGateway(
      flinkUrl(),
      {
        'gateway.tokens.store-dir': storeDir,
        'gateway.tokens.watcher.interval': '200 ms',
        'security.delegation.tokens.reobtain.cooldown': '0 ms',
        ...extra,
      },
      [],
      { providers: [provider], receivers: [receiver] },
    );
    gateways.push(gw);
    return gw;
  };
  const stop = async (gw: TestGateway) => {
    gateways.splice(gateways.indexOf(gw), 1);
    await gw.close();
  };
  const uploadWordCount = async (gw: TestGateway) =>
    String((await uploadFile(gw.url, WORDCOUNT_JAR, 'WordCount.jar')).body.filename)
      .split('/')
      .pop()!;
  const overviewIds = async (gw: TestGateway) =>
    ((await json('GET', `${gw.url}/v1/jobs/overview`)).body.jobs as { jid: string }[]).map((j) => j.jid);
  const storedIds = () =>
    (JSON.parse(readFileSync(join(storeDir, 'registrations.json'), 'utf8')) as { jobs: { jobId: string }[] }).jobs.map((j) => j.jobId);

  beforeEach(() => {
    storeDir = mkdtempSync(join(tmpdir(), 'gw-e2e-tokens-'));
    inputDir = mkdtempSync(join(tmpdir(), 'gw-e2e-input-'));
    writeFileSync(join(inputDir, 'words.txt'), 'to be or not to be\n');
  });
  afterEach(async () => {
    // A test that failed half-way must not leave a never-ending job on the shared cluster.
    for (const jobId of jobsToCancel) {
      const gw = gateways[0] ?? (await start(new TestTokenProvider()));
      await json('PATCH', `${gw.url}/jobs/${jobId}?mode=cancel`);
      await waitForJobState(gw.url, jobId, ['CANCELED', 'FINISHED', 'FAILED']).catch(() => undefined);
    }
    jobsToCancel.clear();
    for (const g of [...gateways]) await stop(g);
    rmSync(storeDir, { recursive: true, force: true });
    rmSync(inputDir, { recursive: true, force: true });
  });

  it('a job a provider refuses answers 400 GW_TOKENS_REJECTED and never reaches the JobManager', async () => {
    const provider = new TestTokenProvider();
    const gw = await start(provider);
    const jarId = await uploadWordCount(gw);
    const jobId = newJobId();
    const run = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      flinkConfiguration: { 'test.reject-job': 'true', 's3.secret-key': 'NOT-FOR-PROVIDERS' },
    });
    assertMatchesSpec('POST', `/v1/jars/${jarId}/run`, run);
    expect(run.status).toBe(400);
    expect(run.body).toEqual({
      errors: [
        "GW_TOKENS_REJECTED: The delegation-token provider 'e2e-tokens' refused the job: test.reject-job is set, so this job gets no tokens. The job was not started.",
      ],
    });
    expect(provider.registered).toEqual([{ jobId, conf: { 'test.reject-job': 'true' } }]);
    expect(provider.unregistered).toEqual([jobId]); // rolled back
    expect(await overviewIds(gw)).not.toContain(jobId);
    expect((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).status).toBe(404);
    const status = await json('GET', `${gw.url}/gateway/v1/tokens`);
    assertMatchesSpec('GET', '/gateway/v1/tokens', status);
    expect(status.body.registeredJobs).toEqual([]);
    await json('DELETE', `${gw.url}/jars/${jarId}`);
  });

  it("a provider sees the job's effective configuration: the cluster's Flink configuration under the request's, secrets removed, its declared job keys kept (fidelity items 11, 12)", async () => {
    const clusterConf = join(inputDir, 'config.yaml');
    writeFileSync(
      clusterConf,
      [
        'pipeline.name: cluster-default',
        'parallelism.default: 1',
        's3.secret-key: CLUSTER-SECRET-1',
        'my.service.api-key: CLUSTER-SECRET-2',
        'security.delegation.token.e2e-tokens.scope: cluster-scope',
        'web.submit.jar-uri.enable: true',
        'rest.port: 8082',
      ].join('\n'),
    );
    const provider = new TestTokenProvider(['security.delegation.token.e2e-tokens.scope']);
    const gw = await start(provider, new TestTokenReceiver(), { 'gateway.cluster.flink-conf': clusterConf });
    // The jar-URI gate came from the cluster's file (a request can still never set it).
    expect(gw.gateway.config.get(coreOptions.jarUriEnable)).toBe(true);
    const jarId = await uploadWordCount(gw);
    const jobId = newJobId();
    const run = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      flinkConfiguration: {
        'security.delegation.token.e2e-tokens.scope': 'reports/2026',
        'db.password': 'REQUEST-SECRET-3',
        'pipeline.name': 'nightly',
      },
    });
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(provider.registered).toEqual([
      {
        jobId,
        conf: {
          'pipeline.name': 'nightly',
          'parallelism.default': '1',
          'security.delegation.token.e2e-tokens.scope': 'reports/2026',
          'web.submit.jar-uri.enable': 'true',
          'rest.port': '8082',
        },
      },
    ]);
    expect(readFileSync(join(storeDir, 'registrations.json'), 'utf8')).not.toMatch(/SECRET/);
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
    expect(JSON.stringify(gw.logs)).not.toMatch(/SECRET/);
    await json('DELETE', `${gw.url}/jars/${jarId}`);
  });

  it('a finished WordCount is unregistered by the job watcher, and its tokens are gone', async () => {
    const provider = new TestTokenProvider();
    const receiver = new TestTokenReceiver();
    const gw = await start(provider, receiver);
    const jarId = await uploadWordCount(gw);
    const jobId = newJobId();
    const run = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, { jobId, flinkConfiguration: { 'parallelism.default': '1' } });
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(provider.registered.map((r) => r.jobId)).toEqual([jobId]);
    expect(storedIds()).toContain(jobId);
    // The provider's re-obtain request produced a cycle that carries the job's tokens.
    await eventually(() => receiver.latest?.jobs[jobId] !== undefined, 'tokens for the new job');
    const during = await json('GET', `${gw.url}/gateway/v1/tokens`);
    assertMatchesSpec('GET', '/gateway/v1/tokens', during);
    expect(during.body.registeredJobs).toContain(jobId);
    expect(JSON.stringify(during.body)).not.toContain('E2E-SECRET');

    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
    await eventually(() => provider.unregistered.includes(jobId), 'the watcher to unregister the finished job');
    expect((await json('GET', `${gw.url}/gateway/v1/tokens`)).body.registeredJobs).not.toContain(jobId);
    expect(storedIds()).not.toContain(jobId);
    // The next obtain cycle (what a provider's cleanup would trigger) no longer carries them.
    gw.gateway.tokens.reobtainDelegationTokens();
    await eventually(() => receiver.latest !== undefined && receiver.latest.jobs[jobId] === undefined, "the job's tokens to disappear");
    await json('DELETE', `${gw.url}/jars/${jarId}`);
  });

  it('a gateway restart registers a still-running job again from the store', async () => {
    const before = new TestTokenProvider();
    const gwA = await start(before);
    const jarId = await uploadWordCount(gwA);
    const jobId = newJobId();
    // Flink's WordCount reading a directory with a discovery interval is a continuous (never-ending) file source.
    const run = await json('POST', `${gwA.url}/v1/jars/${jarId}/run`, {
      jobId,
      programArgsList: ['--input', inputDir, '--discovery-interval', '1s'],
      flinkConfiguration: { 'parallelism.default': '1', 'pipeline.name': 'e2e-long-running' },
    });
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    jobsToCancel.add(jobId);
    expect(await waitForJobState(gwA.url, jobId, ['RUNNING', 'FINISHED', 'FAILED'])).toBe('RUNNING');
    await stop(gwA);
    // Closing ends the manager's session (providers forget the job) but the store keeps it.
    expect(before.unregistered).toEqual([jobId]);
    expect(storedIds()).toEqual([jobId]);

    const after = new TestTokenProvider();
    const gwB = await start(after);
    expect(after.registered).toEqual([{ jobId, conf: { 'parallelism.default': '1', 'pipeline.name': 'e2e-long-running' } }]);
    expect((await json('GET', `${gwB.url}/gateway/v1/tokens`)).body.registeredJobs).toEqual([jobId]);
    expect(await waitForJobState(gwB.url, jobId, ['RUNNING'])).toBe('RUNNING');

    const cancel = await json('PATCH', `${gwB.url}/jobs/${jobId}?mode=cancel`);
    expect(cancel.status).toBe(202);
    expect(await waitForJobState(gwB.url, jobId, ['CANCELED'])).toBe('CANCELED');
    jobsToCancel.delete(jobId);
    await eventually(() => after.unregistered.includes(jobId), 'the watcher to unregister the canceled job');
    expect(storedIds()).toEqual([]);
    await json('DELETE', `${gwB.url}/jars/${jarId}`);
  });
});
