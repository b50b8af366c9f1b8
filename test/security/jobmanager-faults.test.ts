import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { ERROR_CODES, type ErrorCode } from '../../src/errors/codes';
import { newJobId, uploadFile, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { bytes, FakeProvider, FakeReceiver } from '../helpers/token-fakes';
import { type Fault, type FaultProxy, type ProxiedRequest, startFaultProxy } from '../servers/fault-proxy';

/**
 * Only a blackholed call ever reaches these, so they cost their length once each; long enough that a
 * real WordCount run (or a pass-through read) on a busy machine is never taken for one that timed out.
 */
const RUN_TIMEOUT_MS = 20_000;
const REQUEST_TIMEOUT_MS = 10_000;
/** The job watcher: a job counts as gone after 3 reads without it over at least this long. */
const MISSING_GRACE_MS = 1_500;
/** Flink's answer while its dispatcher has no leader yet (EndpointNotStartedException → 503, one element). */
const LEADER_ELECTION = JSON.stringify({ errors: ['Service temporarily unavailable due to an ongoing leader election. Please refresh.'] });
/** Every code a failed submission may end with: a clear, documented gateway error. */
const CLEAR = new Set<string>([
  'GW_CLUSTER_UNAVAILABLE',
  'GW_CLUSTER_NOT_READY',
  'GW_CLUSTER_TIMEOUT',
  'GW_CLUSTER_ERROR',
  'GW_CLUSTER_BAD_RESPONSE',
]);

/** Figures for the closing line. */
const figures = {
  submissions: 0,
  succeeded: 0,
  cleanErrors: 0,
  rolledBack: 0,
  keptThenDropped: 0,
  registrationsLeaked: 0,
  registrationsLost: 0,
  passThroughClean: 0,
  hangs: 0,
};

interface Answer {
  status: number;
  body: Record<string, unknown>;
  retryAfter?: string;
}

/**
 * One HTTP call with a bound: a gateway that does not answer within `timeoutMs` is a hang, and fails
 * the test. The default is the gateway's longest timeout plus a generous minute for a busy machine.
 */
async function call(
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
  url: string,
  body?: unknown,
  timeoutMs = RUN_TIMEOUT_MS + 60_000,
): Promise<Answer> {
  try {
    const res = await request(url, {
      method,
      signal: AbortSignal.timeout(timeoutMs),
      ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
    });
    const text = await res.body.text();
    const retryAfter = res.headers['retry-after'];
    return {
      status: res.statusCode,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
    };
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') {
      figures.hangs++;
      throw new Error(`${method} ${url} did not answer within ${timeoutMs} ms (a hang)`);
    }
    throw err;
  }
}

/**
 * `{"errors":["<CODE>: <message>", ...Flink's own strings]}` and nothing else, with the status the registry
 * gives the code. What follows the gateway's message is the JobManager's text, verbatim; never a second code.
 */
function cleanError(r: Answer): ErrorCode {
  expect(Object.keys(r.body)).toEqual(['errors']);
  const errors = r.body.errors as string[];
  expect(errors.length).toBeGreaterThanOrEqual(1);
  expect(errors.slice(1).filter((e) => /^GW_[A-Z_]+: /.test(e))).toEqual([]);
  const code = /^(GW_[A-Z_]+): \S/.exec(errors[0]!)?.[1] as ErrorCode | undefined;
  expect(code).toBeDefined();
  expect(r.status).toBe(ERROR_CODES[code!].status);
  return code!;
}

async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
}

const isRun = (req: ProxiedRequest) => req.method === 'POST' && /\/jars\/[^/]+\/run(\?|$)/.test(req.path);
/** The pass-through probes carry a marker, so that their faults never hit the job watcher's reads. */
const isProbe = (req: ProxiedRequest) => req.path.includes('probe=');

/**
 * JobManager faults: a TCP fault proxy (test/servers/fault-proxy.ts) between the gateway and the
 * real embedded Flink, with a fake token provider registered, so that every run registers its job
 * before the JobManager sees it. Down (nothing listening), 5xx answers, slow beyond
 * gateway.cluster.run-timeout (with the run lost, or with the run reaching Flink), a connection
 * closed unanswered, and a restart. Each submission ends in success or a documented error with the
 * registry's status; the registration is rolled back when the JobManager provably has no job, kept
 * while the outcome is unknown, and dropped by the job watcher (short intervals, set through its
 * options) once the job provably never appeared.
 */
describe('JobManager faults between the gateway and the real embedded Flink', () => {
  let proxy: FaultProxy;
  let gw: TestGateway;
  let provider: FakeProvider;
  let jarId: string;
  let inputDir: string;
  /** Jobs a case started on Flink; cancelled directly on Flink if a case failed half-way. */
  const started = new Set<string>();
  const t0 = performance.now();

  beforeAll(async () => {
    inputDir = mkdtempSync(join(tmpdir(), 'gw-jm-faults-input-'));
    writeFileSync(join(inputDir, 'words.txt'), 'to be or not to be\n');
    const flink = new URL(flinkUrl());
    proxy = await startFaultProxy({ host: flink.hostname, port: Number(flink.port) });
    provider = new FakeProvider('jm-faults');
    provider.obtain = () => ({ tokens: bytes('JM-FAULTS-TOKEN'), validUntil: Date.now() + 3_600_000 });
    gw = await startGateway(
      proxy.url,
      {
        'gateway.cluster.run-timeout': `${RUN_TIMEOUT_MS} ms`,
        'gateway.cluster.request-timeout': `${REQUEST_TIMEOUT_MS} ms`,
        'gateway.tokens.watcher.interval': '100 ms',
        'gateway.tokens.watcher.max-backoff': '400 ms',
        'gateway.tokens.watcher.missing-reads': '3',
        'gateway.tokens.watcher.missing-grace': `${MISSING_GRACE_MS} ms`,
      },
      [],
      { providers: [provider], receivers: [new FakeReceiver('jm-faults')] },
    );
    const up = await uploadFile(gw.url, WORDCOUNT_JAR, 'WordCount.jar');
    expect(up.status).toBe(200);
    jarId = String(up.body.filename).split('/').pop()!;
  }, 60_000);

  afterEach(async () => {
    proxy.setPlan(() => ({ kind: 'pass' }));
    await proxy.resume();
  });

  afterAll(async () => {
    // Straight to Flink: a case that failed half-way must not leave a never-ending job on the shared cluster.
    for (const jobId of started) {
      await call('PATCH', `${flinkUrl()}/v1/jobs/${jobId}?mode=cancel`).catch(() => undefined);
      await eventually(
        async () => ['CANCELED', 'FINISHED', 'FAILED'].includes(await flinkState(jobId)),
        `job ${jobId} to end`,
        15_000,
      ).catch(() => undefined);
    }
    if (gw) {
      // Every job has ended: the watcher must let go of all of them.
      await eventually(() => provider.jobs.size === 0, 'the watcher to drop every registration', 5_000).catch(() => undefined);
      figures.registrationsLeaked = new Set([...provider.jobs, ...gw.gateway.tokens.status().registeredJobs]).size;
      if (jarId) await call('DELETE', `${gw.url}/jars/${jarId}`).catch(() => undefined);
      await gw.close();
    }
    await proxy?.stop();
    if (inputDir) rmSync(inputDir, { recursive: true, force: true });
    console.log(
      `jobmanager faults summary: submissions ${figures.submissions}, succeeded ${figures.succeeded}, clean errors ${figures.cleanErrors}, ` +
        `rolled back ${figures.rolledBack}, kept then dropped by the watcher ${figures.keptThenDropped}, ` +
        `registrations leaked ${figures.registrationsLeaked} (must be 0), registrations lost by a running job ${figures.registrationsLost} (must be 0), ` +
        `clean pass-through errors ${figures.passThroughClean}, hangs ${figures.hangs} (must be 0), wall ${Math.round(performance.now() - t0)} ms`,
    );
  }, 60_000);

  /** One run of the uploaded WordCount; a continuous one (never ends) when `continuous`. */
  async function submit(jobId: string, continuous = false): Promise<{ status: number; code: string }> {
    figures.submissions++;
    const r = await call('POST', `${gw.url}/v1/jars/${jarId}/run`, {
      jobId,
      ...(continuous ? { programArgsList: ['--input', inputDir, '--discovery-interval', '1s'] } : {}),
      flinkConfiguration: { 'parallelism.default': '1' },
    });
    if (r.status === 200) {
      figures.succeeded++;
      started.add(jobId);
      expect(r.body).toEqual({ jobid: jobId });
      return { status: 200, code: '' };
    }
    const code = cleanError(r);
    expect({ code, clear: CLEAR.has(code), errors: r.body.errors }).toMatchObject({ code, clear: true });
    // Every 503 says when to retry (Flink's RestClusterClient retries 503s).
    if (r.status === 503) expect(r.retryAfter).toMatch(/^\d+$/);
    figures.cleanErrors++;
    return { status: r.status, code };
  }

  const registered = async (): Promise<string[]> => (await call('GET', `${gw.url}/gateway/v1/tokens`)).body.registeredJobs as string[];
  /** The job's state on Flink itself (not through the proxy), or 'none'. */
  async function flinkState(jobId: string): Promise<string> {
    const r = await call('GET', `${flinkUrl()}/v1/jobs/${jobId}`);
    return r.status === 200 ? String(r.body.state) : 'none';
  }
  /** Registered with the provider before the run, and rolled back everywhere after it. */
  async function expectRolledBack(jobId: string): Promise<void> {
    expect(provider.registered.map((r) => r.jobId)).toContain(jobId);
    expect(provider.unregistered).toContain(jobId);
    expect(provider.jobs.has(jobId)).toBe(false);
    expect(await registered()).not.toContain(jobId);
    figures.rolledBack++;
  }
  /** Kept now; dropped by the job watcher later, but only after the missing grace period. */
  async function expectKeptThenDropped(jobId: string): Promise<void> {
    const since = performance.now();
    expect(provider.jobs.has(jobId)).toBe(true);
    expect(await registered()).toContain(jobId);
    await eventually(() => !provider.jobs.has(jobId), `the job watcher to drop ${jobId}`, 60_000);
    expect(performance.now() - since).toBeGreaterThanOrEqual(MISSING_GRACE_MS - 100);
    expect(await registered()).not.toContain(jobId);
    expect(gw.logs.some((l) => l.jobId === jobId && l.msg === 'job is no longer known to the JobManager; unregistering it')).toBe(true);
    figures.keptThenDropped++;
  }

  it('JobManager down (nothing listening): 503 GW_CLUSTER_UNAVAILABLE, registration rolled back, no job on Flink', async () => {
    proxy.pause();
    const jobId = newJobId();
    expect(await submit(jobId)).toEqual({ status: 503, code: 'GW_CLUSTER_UNAVAILABLE' });
    await expectRolledBack(jobId);
    expect(await flinkState(jobId)).toBe('none');
  });

  it.each<[string, number, string, Fault]>([
    ["503 (leader election, in Flink's envelope)", 503, 'GW_CLUSTER_NOT_READY', { kind: 'status', status: 503, body: LEADER_ELECTION }],
    ['503 (a proxy in front of it, text body)', 503, 'GW_CLUSTER_NOT_READY', { kind: 'status', status: 503 }],
    ['502 (a proxy in front of it, text body)', 502, 'GW_CLUSTER_ERROR', { kind: 'status', status: 502 }],
    ['504 (a proxy in front of it, text body)', 502, 'GW_CLUSTER_ERROR', { kind: 'status', status: 504 }],
  ])('JobManager answers the run with %s → %i %s, registration rolled back', async (_what, status, code, fault) => {
    proxy.setPlan((req) => (isRun(req) ? fault : { kind: 'pass' }));
    const jobId = newJobId();
    expect(await submit(jobId)).toEqual({ status, code });
    await expectRolledBack(jobId);
    expect(await flinkState(jobId)).toBe('none');
  });

  it('slow beyond run-timeout, the run never reached Flink: 504 GW_CLUSTER_TIMEOUT; the registration is kept while unknown, then dropped by the watcher', async () => {
    proxy.setPlan((req) => (isRun(req) ? { kind: 'blackhole' } : { kind: 'pass' }));
    const jobId = newJobId();
    // GW_CLUSTER_TIMEOUT is the gateway's own run-timeout answering (no time bound: the machine may be busy).
    expect(await submit(jobId)).toEqual({ status: 504, code: 'GW_CLUSTER_TIMEOUT' });
    await expectKeptThenDropped(jobId);
    expect(provider.unregistered).toContain(jobId);
    expect(await flinkState(jobId)).toBe('none');
  }, 180_000);

  it('connection closed unanswered after the run was sent (FIN, then RST): 503 GW_CLUSTER_UNAVAILABLE, kept while unknown, then dropped by the watcher', async () => {
    for (const reset of [false, true]) {
      proxy.setPlan((req) => (isRun(req) ? { kind: 'close', reset } : { kind: 'pass' }));
      const jobId = newJobId();
      expect(await submit(jobId)).toEqual({ status: 503, code: 'GW_CLUSTER_UNAVAILABLE' });
      await expectKeptThenDropped(jobId);
      expect(await flinkState(jobId)).toBe('none');
    }
  }, 180_000);

  it('JobManager restarting (refused, then 503 while it elects a leader, then slow): clean errors with rollback, the retry runs to FINISHED', async () => {
    const jobId = newJobId();
    proxy.pause();
    expect(await submit(jobId)).toEqual({ status: 503, code: 'GW_CLUSTER_UNAVAILABLE' });
    await expectRolledBack(jobId);

    await proxy.resume();
    proxy.setPlan((req) => (isRun(req) ? { kind: 'status', status: 503, body: LEADER_ELECTION } : { kind: 'pass' }));
    const retry1 = await submit(jobId);
    expect(retry1).toEqual({ status: 503, code: 'GW_CLUSTER_NOT_READY' });
    await expectRolledBack(jobId);
    expect(provider.unregistered.filter((j) => j === jobId)).toHaveLength(2);

    // Up, but slow to answer (within run-timeout): the run succeeds.
    proxy.setPlan((req) => (isRun(req) ? { kind: 'delay', ms: 500 } : { kind: 'pass' }));
    expect(await submit(jobId)).toEqual({ status: 200, code: '' });
    expect(provider.jobs.has(jobId)).toBe(true);
    expect(await registered()).toContain(jobId);
    await eventually(async () => ['FINISHED', 'FAILED', 'CANCELED'].includes(await flinkState(jobId)), `job ${jobId} to end`, 60_000);
    expect(await flinkState(jobId)).toBe('FINISHED');
    started.delete(jobId);
    await eventually(() => !provider.jobs.has(jobId), 'the watcher to drop the finished job', 60_000);
    expect(gw.logs.some((l) => l.jobId === jobId && l.msg === 'job reached a globally terminal state; unregistering it')).toBe(true);
  }, 180_000);

  it('slow beyond run-timeout, but the run DID reach Flink: 504, the registration is kept and the job runs; a retry during an outage keeps it; dropped once cancelled', async () => {
    // The run is forwarded; its answer is withheld until the gateway gives up.
    proxy.setPlan((req) => (isRun(req) ? { kind: 'stall', afterBytes: 0 } : { kind: 'pass' }));
    const jobId = newJobId();
    expect(await submit(jobId, true)).toEqual({ status: 504, code: 'GW_CLUSTER_TIMEOUT' });
    started.add(jobId);
    expect(await registered()).toContain(jobId);
    await eventually(async () => (await flinkState(jobId)) === 'RUNNING', `job ${jobId} RUNNING on Flink`, 60_000);
    // Visible through the gateway too, once the proxy passes again.
    proxy.setPlan(() => ({ kind: 'pass' }));
    const overview = await call('GET', `${gw.url}/v1/jobs/overview`);
    expect((overview.body.jobs as { jid: string }[]).map((j) => j.jid)).toContain(jobId);
    // Past the grace period the watcher, which sees the job, has not let go of it.
    await new Promise((r) => setTimeout(r, MISSING_GRACE_MS + 500));
    expect(provider.jobs.has(jobId)).toBe(true);
    expect(await registered()).toContain(jobId);

    // The client retries (same jobId, as the operator does) while the JobManager is unreachable:
    // the refusal proves nothing about the first attempt, whose job is running.
    proxy.pause();
    expect(await submit(jobId, true)).toEqual({ status: 503, code: 'GW_CLUSTER_UNAVAILABLE' });
    if (!provider.jobs.has(jobId)) figures.registrationsLost++;
    expect(provider.jobs.has(jobId)).toBe(true);
    expect(await registered()).toContain(jobId);
    await proxy.resume();
    // And once it is back: the JobManager already has the job, so the retry is accepted.
    expect(await submit(jobId, true)).toEqual({ status: 200, code: '' });
    expect(await flinkState(jobId)).toBe('RUNNING');
    expect(provider.jobs.has(jobId)).toBe(true);

    expect((await call('PATCH', `${gw.url}/jobs/${jobId}?mode=cancel`)).status).toBe(202);
    await eventually(async () => (await flinkState(jobId)) === 'CANCELED', `job ${jobId} CANCELED`, 60_000);
    started.delete(jobId);
    await eventually(() => !provider.jobs.has(jobId), 'the watcher to drop the cancelled job', 60_000);
    expect(await registered()).not.toContain(jobId);
  }, 180_000);

  it("pass-through during the outage answers a clean error in Flink's envelope, never hangs", async () => {
    const probe = async (path: string, expected: { status: number; code: string }) => {
      // Never hangs: the gateway answers (a blackhole with its own request-timeout's code); the
      // client gives up only after a generous minute, so a busy machine is not taken for a hang.
      const r = await call('GET', `${gw.url}${path}${path.includes('?') ? '&' : '?'}probe=1`, undefined, REQUEST_TIMEOUT_MS + 60_000);
      expect({ status: r.status, code: cleanError(r) }).toEqual(expected);
      figures.passThroughClean++;
    };
    const unavailable = { status: 503, code: 'GW_CLUSTER_UNAVAILABLE' };
    proxy.pause();
    for (const path of ['/v1/jobs/overview', '/jobs/overview', '/v1/overview', `/v1/jobs/${newJobId()}`]) await probe(path, unavailable);
    await proxy.resume();
    proxy.setPlan((req) => (isProbe(req) ? { kind: 'close' } : { kind: 'pass' }));
    await probe('/v1/jobs/overview', unavailable);
    proxy.setPlan((req) => (isProbe(req) ? { kind: 'close', reset: true } : { kind: 'pass' }));
    await probe('/v1/jobs/overview', unavailable);
    // Accepted and never answered: bounded by gateway.cluster.request-timeout.
    proxy.setPlan((req) => (isProbe(req) ? { kind: 'blackhole' } : { kind: 'pass' }));
    await probe('/v1/jobs/overview', { status: 504, code: 'GW_CLUSTER_TIMEOUT' });
    // A JobManager electing a leader answers 503: passed through as it is, with a Retry-After.
    proxy.setPlan((req) => (isProbe(req) ? { kind: 'status', status: 503, body: LEADER_ELECTION } : { kind: 'pass' }));
    const electing = await call('GET', `${gw.url}/v1/jobs/overview?probe=1`);
    expect({ status: electing.status, retryAfter: electing.retryAfter }).toEqual({ status: 503, retryAfter: '5' });
    // Back: the real answer.
    proxy.setPlan(() => ({ kind: 'pass' }));
    const ok = await call('GET', `${gw.url}/v1/jobs/overview?probe=1`);
    expect(ok.status).toBe(200);
    expect(Array.isArray(ok.body.jobs)).toBe(true);
  }, 180_000);
});
