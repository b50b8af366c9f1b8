import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StandaloneCluster } from '../../src/cluster/standalone-cluster';
import { httpPlugin } from '../../fs-plugins/http';
import { projectRoot } from '../../src/project-root';
import type { DelegationTokenProvider, JobConfiguration, JobContext } from '../../src/plugin-kit/token-spi';
import { json, uploadBytes, waitForJobState } from '../helpers/flink';
import { startDistCluster } from '../helpers/flink-dist';
import { startGateway, type TestGateway } from '../helpers/gateway';
import { operatorPlaceholderJar } from '../helpers/operator-placeholder';
import { type HttpOrigin, startHttpOrigin } from '../servers/http-origin';

const MULTI_JOB_JAR = join(projectRoot(__dirname), 'embedded-flink', 'target', 'test-jars', 'MultiJobApplication.jar');

/** The first value `check` yields within `timeoutMs`. */
async function eventually<T>(check: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await check();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for: ${what}`);
}

class RecordingProvider implements DelegationTokenProvider {
  readonly serviceName = 'e2e-applications';
  readonly jobRequestKeys = ['security.delegation.job.e2e-applications.scope'];
  readonly registered: { jobId: string; conf: JobConfiguration; principal: string }[] = [];
  readonly unregistered: string[] = [];
  init(): void {}
  delegationTokensRequired(): boolean {
    return false;
  }
  async obtainDelegationTokens(): Promise<{ tokens: Uint8Array }> {
    return { tokens: new Uint8Array() };
  }
  registerJob(jobId: string, conf: JobConfiguration, context: JobContext): void {
    this.registered.push({ jobId, conf, principal: context.principal });
  }
  unregisterJob(jobId: string): void {
    this.unregistered.push(jobId);
  }
}

/**
 * Flink 2.3 applications (`POST /jars/:jarid/run-application`) on Flink 2.3.0's own distribution
 * (no HA: Flink fixes no job id, so the gateway chooses the first job's), with an application whose
 * main() runs two jobs, the second loading a class only after the first has ended.
 */
describe('Flink 2.3.0 applications through the gateway: every job registered, the jar kept until the end', () => {
  let cluster: StandaloneCluster;
  let gw: TestGateway;
  let origin: HttpOrigin;
  let dir: string;
  const provider = new RecordingProvider();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-dist-apps-'));
    await Promise.all([
      startDistCluster('2.3.0', { taskManagers: 1, slots: 2 }).then((c) => (cluster = c)),
      startHttpOrigin({ files: { '/apps/multi.jar': readFileSync(MULTI_JOB_JAR) } }).then((o) => (origin = o)),
    ]);
    gw = await startGateway(
      cluster.restUrl,
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
        'gateway.tokens.store-dir': join(dir, 'store'),
        'gateway.tokens.watcher.interval': '200 ms',
        'gateway.tokens.cluster-default-configuration': 'security.delegation.job.e2e-applications.scope:cluster-default',
      },
      [httpPlugin],
      { providers: [provider], receivers: [{ serviceName: provider.serviceName, init() {}, onNewTokensObtained() {} }] },
    );
  }, 600_000);

  afterAll(async () => {
    await gw?.close();
    await Promise.all([cluster?.stop(), origin?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("a multi-job application by URI: both jobs registered with the application's registration; its transient jar stays until the application ends", async () => {
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: await operatorPlaceholderJar(), field: 'file_0' }], {
      request: '{}',
    });
    const placeholder = String(up.body.filename).split('/').pop()!;
    const jarsBefore = await jmJarIds();
    const r = await json('POST', `${gw.url}/v1/jars/${placeholder}/run-application`, {
      entryClass: 'dev.flinkjargateway.testjobs.MultiJobApplication',
      programArgsList: ['--keep-running'],
      flinkConfiguration: {
        'user.artifacts.job-jar': `${origin.url}/apps/multi.jar`,
        'security.delegation.job.e2e-applications.scope': 'team-a',
      },
    });
    expect({ status: r.status, body: r.status === 202 ? {} : r.body }).toEqual({ status: 202, body: {} });
    const applicationId = String(r.body.applicationid);
    // Without HA Flink fixes no job id and the gateway sends none (a fixed id would make the
    // second job a duplicate of the first): the application is registered under its own id until
    // its jobs are listed, each then registered under its own id.
    expect(gw.audit().find((a) => a.route === 'run-application')?.jobId).toBe(applicationId);
    const jobsOf = async () =>
      (((await json('GET', `${gw.url}/v1/applications/${applicationId}`)).body.jobs as { jid: string }[] | undefined) ?? []).map(
        (j) => j.jid,
      );
    const first = await eventually(async () => (await jobsOf())[0], 'the application to submit its first job', 120_000);
    expect(await waitForJobState(gw.url, first, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
    // main() goes on (loading a class it had not loaded yet) and submits its second job.
    const second = await eventually(
      async () => (await jobsOf()).find((j) => j !== first),
      'the application to submit its second job',
      120_000,
    );
    expect(await waitForJobState(gw.url, second, ['RUNNING', 'FAILED', 'FINISHED'])).toBe('RUNNING');
    const registration = await eventually(
      () => provider.registered.find((x) => x.jobId === second),
      "the second job's registration",
      30_000,
    );
    const firstRegistration = await eventually(
      () => provider.registered.find((x) => x.jobId === first),
      "the first job's registration",
      30_000,
    );
    // Neither job was discovered with the cluster default scope; the stand-in under the application id ended.
    expect(provider.registered.filter((x) => x.conf['security.delegation.job.e2e-applications.scope'] === 'cluster-default')).toEqual([]);
    expect(provider.registered.map((x) => x.jobId)).toEqual([applicationId, first, second]);
    expect(provider.unregistered).toContain(applicationId);
    // The application's own registration, never the cluster default scope.
    expect(registration.principal).toBe('anonymous');
    expect(registration.conf['security.delegation.job.e2e-applications.scope']).toBe('team-a');
    expect(registration.conf).toEqual(firstRegistration.conf);
    const status = await json('GET', `${gw.url}/gateway/v1/tokens`);
    expect((status.body.jobs as { jobId: string; principal: string }[]).find((j) => j.jobId === second)).toMatchObject({
      principal: 'anonymous',
      source: 'submitted',
    });
    // The transient jar is still on the JobManager while the application runs …
    const transient = (await jmJarIds()).filter((id) => !jarsBefore.includes(id) && id !== placeholder);
    expect(transient).toHaveLength(1);
    // … and given back once it is terminal.
    expect((await json('POST', `${gw.url}/v1/applications/${applicationId}/cancel`)).status).toBeLessThan(300);
    expect(await waitForJobState(gw.url, second, ['CANCELED', 'FAILED', 'FINISHED'])).toBe('CANCELED');
    await eventually(
      async () => (!(await jmJarIds()).includes(transient[0]!) ? true : undefined),
      'the transient jar to be deleted',
      30_000,
    );
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`);
  }, 300_000);

  async function jmJarIds(): Promise<string[]> {
    const r = await json('GET', `${cluster.restUrl}/v1/jars`);
    return ((r.body.files as { id: string }[] | undefined) ?? []).map((f) => f.id);
  }
});
