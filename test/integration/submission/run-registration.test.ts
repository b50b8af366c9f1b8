import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { type Origin, startOrigin } from '../../helpers/origin';
import { bytes, FakeProvider, FakeReceiver } from '../../helpers/token-fakes';
import { JobRefusedError } from '../../../src/plugin-kit/registration-error';

const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';
const J3 = '33333333333333333333333333333333';

/**
 * The registration hook on the run path, with a node:http origin standing in for the JobManager
 * (so it can refuse runs and list jobs at will): register before run, reject before the JobManager,
 * roll back after a refusal, persist, and restore at start.
 */
describe('job registration on the run path', () => {
  let jm: Origin;
  const state = { runs: [] as { jobId: string; registeredBefore: boolean }[], refuse: false, jobs: [] as { jid: string; state: string }[] };
  let provider: FakeProvider;
  let storeDir: string;
  let gw: TestGateway | undefined;

  beforeEach(async () => {
    state.runs = [];
    state.refuse = false;
    state.jobs = [];
    storeDir = mkdtempSync(join(tmpdir(), 'gw-run-reg-'));
    provider = newProvider();
    jm = await startOrigin((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (d: string) => (body += d));
      req.on('end', () => {
        const send = (status: number, payload: unknown) =>
          res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
        if (req.method === 'POST' && /^\/v1\/jars\/[^/]+\/run/.test(req.url!)) {
          const { jobId } = JSON.parse(body) as { jobId: string };
          state.runs.push({ jobId, registeredBefore: provider.jobs.has(jobId) });
          return state.refuse ? send(400, { errors: ['The main method caused an error: boom'] }) : send(200, { jobid: jobId });
        }
        if (req.url === '/v1/jobs/overview') return send(200, { jobs: state.jobs });
        if (/^\/v1\/jobs\/[0-9a-f]{32}\/status$/.test(req.url!)) return send(404, { errors: ['Job not found'] });
        send(404, { errors: ['Not found'] });
      });
    });
  });
  afterEach(async () => {
    await gw?.close();
    gw = undefined;
    await jm.close();
    rmSync(storeDir, { recursive: true, force: true });
  });

  function newProvider(): FakeProvider {
    const p = new FakeProvider('test-tokens');
    p.obtain = () => ({ tokens: bytes('TOKEN-VALUE-NEVER-SHOWN'), validUntil: Date.now() + 3_600_000 });
    p.register = (_jobId, conf) => {
      // Not `test.tokens.reject`: any key containing "token" is dropped as sensitive before a
      // provider sees it (see the first test).
      if (conf['test.reject-job'] === 'true') throw new JobRefusedError('this job may not have tokens');
      // A bug in the provider (not a refusal).
      if (conf['test.provider-bug'] === 'true') (conf as unknown as { missing: { field: string } }).missing.field;
    };
    return p;
  }

  const start = async (p = provider) => {
    gw = await startGateway(jm.url, { 'gateway.tokens.store-dir': storeDir }, [], {
      providers: [p],
      receivers: [new FakeReceiver('test-tokens')],
    });
    return gw;
  };
  const run = async (jobId: string, flinkConfiguration: Record<string, string> = {}) => {
    const res = await request(`${gw!.url}/v1/jars/x_app.jar/run`, { method: 'POST', body: JSON.stringify({ jobId, flinkConfiguration }) });
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
  };
  const stored = (): string[] => {
    if (!existsSync(join(storeDir, 'registrations.json'))) return [];
    return (JSON.parse(readFileSync(join(storeDir, 'registrations.json'), 'utf8')) as { jobs: { jobId: string }[] }).jobs.map(
      (j) => j.jobId,
    );
  };

  it('registers the job before the JobManager runs it, with a redacted copy, and persists it', async () => {
    await start();
    const r = await run(J1, { 'parallelism.default': '2', 's3.secret-key': 'SECRET', 'test.tokens.reject': 'true' });
    expect(r).toEqual({ status: 200, body: { jobid: J1 } });
    expect(state.runs).toEqual([{ jobId: J1, registeredBefore: true }]);
    // Sensitive by declaration or by name (secret, token, password, ...): never given to a provider.
    expect(provider.registered[0]!.conf).toEqual({ 'parallelism.default': '2' });
    expect(stored()).toEqual([J1]);
    expect(readFileSync(join(storeDir, 'registrations.json'), 'utf8')).not.toContain('SECRET');
    const status = await request(`${gw!.url}/gateway/v1/tokens`);
    const text = await status.body.text();
    expect(JSON.parse(text)).toMatchObject({ enabled: true, providers: [{ serviceName: 'test-tokens' }], registeredJobs: [J1] });
    expect(text).not.toContain('TOKEN-VALUE-NEVER-SHOWN');
  });

  it('a provider refusal answers 400 GW_TOKENS_REJECTED and the JobManager never sees the run', async () => {
    await start();
    const r = await run(J1, { 'test.reject-job': 'true' });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      errors: [
        "GW_TOKENS_REJECTED: The delegation-token provider 'test-tokens' refused the job: this job may not have tokens. The job was not started.",
      ],
    });
    expect(state.runs).toEqual([]);
    expect(provider.unregistered).toEqual([J1]);
    expect(stored()).toEqual([]);
  });

  it('a provider that fails unexpectedly (a bug, not a refusal) answers 500 GW_TOKENS_PROVIDER_FAILED and is marked unhealthy', async () => {
    await start();
    const r = await run(J1, { 'test.provider-bug': 'true' });
    expect(r.status).toBe(500);
    expect(r.body).toEqual({
      errors: [expect.stringMatching(/^GW_TOKENS_PROVIDER_FAILED: The delegation-token provider 'test-tokens' failed unexpectedly/)],
    });
    // The provider's own words (a TypeError here) are not the client's business: the log and the status route have them.
    expect(JSON.stringify(r.body)).not.toMatch(/Cannot read properties/);
    expect(state.runs).toEqual([]);
    expect(provider.unregistered).toEqual([J1]);
    const status = (await (await request(`${gw!.url}/gateway/v1/tokens`)).body.json()) as {
      providers: { serviceName: string; healthy: boolean; failure?: { message: string } }[];
    };
    expect(status.providers).toEqual([
      expect.objectContaining({
        serviceName: 'test-tokens',
        healthy: false,
        failure: expect.objectContaining({ message: expect.stringMatching(/Cannot read properties of undefined/) }),
      }),
    ]);
    // A refusal is not a failure of the provider; its next successful registration makes it healthy again.
    expect((await run(J2, { 'test.reject-job': 'true' })).status).toBe(400);
    expect((await run(J2)).status).toBe(200);
    const after = (await (await request(`${gw!.url}/gateway/v1/tokens`)).body.json()) as { providers: { healthy: boolean }[] };
    expect(after.providers[0]!.healthy).toBe(true);
  });

  it('rolls the registration back when the JobManager refuses the run', async () => {
    await start();
    state.refuse = true;
    const r = await run(J1);
    expect(r.status).toBe(400);
    expect((r.body.errors as string[])[0]).toMatch(/^GW_RUN_REJECTED: /);
    expect(state.runs).toHaveLength(1);
    expect(provider.unregistered).toEqual([J1]);
    expect(provider.jobs.size).toBe(0);
    expect(stored()).toEqual([]);
    expect(gw!.gateway.tokens.status().registeredJobs).toEqual([]);
  });

  it('at start, registers the stored jobs the JobManager still runs again, drops the ended ones and keeps the unlisted ones as absent', async () => {
    await start();
    for (const j of [J1, J2, J3]) expect((await run(j)).status).toBe(200);
    await gw!.close();
    gw = undefined;
    state.jobs = [
      { jid: J1, state: 'RUNNING' },
      { jid: J2, state: 'FINISHED' },
    ];
    const restarted = newProvider();
    await start(restarted);
    expect(restarted.registered.map((r) => r.jobId)).toEqual([J1]);
    expect(restarted.unregistered.sort()).toEqual([J2, J3]);
    expect(gw!.gateway.tokens.status().registeredJobs).toEqual([J1]);
    // J3 is not listed (a JobManager may still be recovering it): kept, not registered, until it is listed again.
    expect(stored()).toEqual([J1, J3]);
  });
});
