import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuditLog } from '../../../src/audit/audit-log';
import { JobWatcher } from '../../../src/cluster/job-watcher';
import { JobManagerClient } from '../../../src/cluster/jobmanager-client';
import { CLUSTER_DEFAULT_PRINCIPAL, JobRegistrations } from '../../../src/submission/job-registrations';
import { FileRegistrationStore } from '../../../src/submission/registration-store';
import { type UnregisteredJobsPolicy, UnregisteredJobs } from '../../../src/submission/unregistered-jobs';
import { PrincipalAllowList } from '../../../src/plugin-kit/provider-support';
import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import { type Origin, startOrigin } from '../../helpers/origin';
import { captureLogger, pairs, tokenConfig } from '../../helpers/token-fakes';
import { JobRefusedError } from '../../../src/plugin-kit/registration-error';

const S = 1000;
const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';
const J3 = '33333333333333333333333333333333';
const DEFAULTS = { 'security.delegation.job.a.scope': 'read', 's3.secret-key': 'NOT-FOR-PROVIDERS' };

/** A node:http JobManager: /v1/jobs/overview as each test sets it, and cancels recorded (the job becomes CANCELING). */
async function jobManager() {
  const state = { jobs: new Map<string, string>(), cancels: [] as string[], cancelStatus: 202 };
  const origin = await startOrigin((req, res) => {
    const cancel = /^\/v1\/jobs\/([0-9a-f]{32})\?mode=cancel$/.exec(req.url ?? '');
    if (req.method === 'PATCH' && cancel) {
      state.cancels.push(cancel[1]!);
      if (state.cancelStatus === 202) state.jobs.set(cancel[1]!, 'CANCELLING');
      res
        .writeHead(state.cancelStatus, { 'content-type': 'application/json' })
        .end(state.cancelStatus === 202 ? '{}' : '{"errors":["no"]}');
      return;
    }
    if (req.url === '/v1/jobs/overview') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jobs: [...state.jobs].map(([jid, s]) => ({ jid, state: s, name: 'x' })) }));
      return;
    }
    res.writeHead(404).end();
  });
  return { state, origin };
}

describe('jobs the gateway did not register (job watcher discovery, an injected clock)', () => {
  let jm: Awaited<ReturnType<typeof jobManager>>;
  let origin: Origin;
  let cluster: JobManagerClient;
  let dir: string;

  beforeEach(async () => {
    jm = await jobManager();
    origin = jm.origin;
    cluster = new JobManagerClient({ baseUrl: origin.url, requestTimeoutMs: 5000, runTimeoutMs: 5000 });
    dir = mkdtempSync(join(tmpdir(), 'gw-unregistered-'));
  });
  afterEach(async () => {
    await cluster.close();
    await origin.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function setup(policy: UnregisteredJobsPolicy) {
    const cap = captureLogger();
    const clock = new ManualClock();
    const config = tokenConfig();
    const { providers, receivers } = pairs('a');
    const tokens = await DefaultTokenManager.create({ config, providers, receivers, log: cap.log, clock });
    const store = new FileRegistrationStore(join(dir, 'store'), cap.log);
    await store.init();
    const registrations = new JobRegistrations({ tokens, store, isSensitive: (k) => config.registry.isSensitive(k), log: cap.log });
    const auditFile = join(dir, 'audit.jsonl');
    const audit = AuditLog.open(auditFile);
    const unregistered = new UnregisteredJobs({ policy, registrations, cluster, defaults: DEFAULTS, audit, log: cap.log, clock });
    const watcher = new JobWatcher({
      cluster,
      jobs: registrations,
      discovery: unregistered,
      intervalMs: 5 * S,
      maxBackoffMs: 60 * S,
      missingReads: 3,
      missingGraceMs: 60 * S,
      log: cap.log,
      clock,
    });
    const audits = () =>
      readFileSync(auditFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((a) => a.audit === 'job');
    return { provider: providers[0]!, registrations, store, unregistered, watcher, audits, clock, cap };
  }

  it('register: a running job nobody registered is registered with the cluster default scope, redacted, under the reserved principal, and audited', async () => {
    const { provider, registrations, store, watcher, audits } = await setup('register');
    jm.state.jobs.set(J1, 'RUNNING');
    jm.state.jobs.set(J2, 'FINISHED');
    // No job is registered: the watcher reads anyway (today it reads only while jobs are registered).
    await watcher.pollOnce();
    expect(provider.registered).toEqual([
      { jobId: J1, conf: { 'security.delegation.job.a.scope': 'read' }, principal: CLUSTER_DEFAULT_PRINCIPAL },
    ]);
    expect(registrations.list()).toEqual([
      expect.objectContaining({ jobId: J1, principal: CLUSTER_DEFAULT_PRINCIPAL, source: 'discovered' }),
    ]);
    expect(store.get(J1)).toMatchObject({
      source: 'discovered',
      principal: CLUSTER_DEFAULT_PRINCIPAL,
      configuration: { 'security.delegation.job.a.scope': 'read' },
    });
    expect(audits()).toEqual([
      expect.objectContaining({
        jobId: J1,
        source: 'discovered',
        action: 'registered',
        state: 'RUNNING',
        policy: 'register',
        principal: CLUSTER_DEFAULT_PRINCIPAL,
      }),
    ]);
    expect(jm.state.cancels).toEqual([]);
    // Once registered it is followed like any job: not registered again, unregistered when it ends.
    await watcher.pollOnce();
    expect(provider.registered).toHaveLength(1);
    jm.state.jobs.set(J1, 'CANCELED');
    await watcher.pollOnce();
    expect(provider.unregistered).toEqual([J1]);
    expect(registrations.list()).toEqual([]);
  });

  it('register: a job a provider refuses the cluster default scope is cancelled and audited', async () => {
    const { provider, registrations, watcher, audits } = await setup('register');
    provider.register = () => {
      throw new JobRefusedError('scope read is not allowed for gateway:cluster-default');
    };
    jm.state.jobs.set(J1, 'RUNNING');
    await watcher.pollOnce();
    expect(jm.state.cancels).toEqual([J1]);
    expect(registrations.list()).toEqual([]);
    expect(audits()).toEqual([
      expect.objectContaining({
        jobId: J1,
        action: 'cancelled',
        error: 'GW_TOKENS_REJECTED',
        reason: expect.stringContaining('not allowed for gateway:cluster-default'),
      }),
    ]);
    // CANCELLING is not terminal: the job is not cancelled (or audited) twice.
    await watcher.pollOnce();
    expect(jm.state.cancels).toEqual([J1]);
  });

  it('cancel: every discovered job is cancelled, a refused cancel is retried at the next read', async () => {
    const { provider, watcher, audits } = await setup('cancel');
    jm.state.jobs.set(J1, 'RUNNING');
    jm.state.cancelStatus = 500;
    await watcher.pollOnce();
    expect(audits()).toEqual([expect.objectContaining({ jobId: J1, action: 'failed', error: 'GW_POLICY_UNREGISTERED_JOBS' })]);
    jm.state.cancelStatus = 202;
    await watcher.pollOnce();
    expect(jm.state.cancels).toEqual([J1, J1]);
    expect(audits()[1]).toMatchObject({ jobId: J1, action: 'cancelled', policy: 'cancel' });
    await watcher.pollOnce();
    expect(jm.state.cancels).toHaveLength(2);
    expect(provider.registered).toEqual([]);
  });

  it('a job first seen while an earlier job graph submission is in flight is left to that submission; discovered once it has ended', async () => {
    const { provider, unregistered, watcher, clock, audits } = await setup('register');
    const endEarly = unregistered.beginJobGraph();
    await clock.advance(S);
    jm.state.jobs.set(J1, 'RUNNING');
    await watcher.pollOnce();
    expect(provider.registered).toEqual([]);
    // A submission that began after the job was seen cannot have made it: it does not hold it back.
    await clock.advance(S);
    const endLate = unregistered.beginJobGraph();
    endEarly();
    await watcher.pollOnce();
    expect(provider.registered.map((r) => r.jobId)).toEqual([J1]);
    endLate();
    // The submission that made J2 registers it itself (before relaying its answer): no discovery line.
    const end = unregistered.beginJobGraph();
    jm.state.jobs.set(J2, 'RUNNING');
    await watcher.pollOnce();
    await unregistered.jobGraphAccepted(J2, 'token:ci', 'req-1', captureLogger().log);
    end();
    await watcher.pollOnce();
    expect(provider.registered.map((r) => [r.jobId, r.principal])).toEqual([
      [J1, CLUSTER_DEFAULT_PRINCIPAL],
      [J2, CLUSTER_DEFAULT_PRINCIPAL],
    ]);
    expect(audits().map((a) => [a.jobId, a.source, a.action, a.submittedBy])).toEqual([
      [J1, 'discovered', 'registered', undefined],
      [J2, 'job-graph', 'registered', 'token:ci'],
    ]);
  });

  it('a job graph refused by a provider is cancelled and answers GW_TOKENS_JOB_CANCELLED', async () => {
    const { provider, registrations, unregistered } = await setup('register');
    provider.register = () => {
      throw new JobRefusedError('no scope for job graphs');
    };
    await expect(unregistered.jobGraphAccepted(J3, 'anonymous', 'req-2', captureLogger().log)).rejects.toMatchObject({
      code: 'GW_TOKENS_JOB_CANCELLED',
      status: 400,
    });
    expect(jm.state.cancels).toEqual([J3]);
    expect(registrations.isKnown(J3)).toBe(false);
  });

  it('a job id registered with the cluster default scope cannot be taken over by a run under that id', async () => {
    const { registrations, watcher, cap } = await setup('register');
    jm.state.jobs.set(J1, 'RUNNING');
    await watcher.pollOnce();
    await expect(registrations.register(J1, { 'security.delegation.job.a.scope': 'read' }, cap.log, 'token:mallory')).rejects.toMatchObject(
      { code: 'GW_RUN_JOB_ID_CONFLICT' },
    );
    expect(registrations.list()[0]).toMatchObject({ principal: CLUSTER_DEFAULT_PRINCIPAL, source: 'discovered' });
  });

  it('ignore: such jobs run unregistered, but each is audited and logged once', async () => {
    const { provider, watcher, audits, cap } = await setup('ignore');
    jm.state.jobs.set(J1, 'RUNNING');
    await watcher.pollOnce();
    await watcher.pollOnce();
    expect(provider.registered).toEqual([]);
    expect(jm.state.cancels).toEqual([]);
    expect(audits()).toEqual([expect.objectContaining({ jobId: J1, action: 'ignored' })]);
    expect(cap.messages('warn').filter((m) => m.includes('runs without delegation tokens'))).toHaveLength(1);
  });

  it("providers' allow-lists can give the reserved principal a scope (gateway:cluster-default=<item>); no caller's principal gets it", () => {
    const list = new PrincipalAllowList(['gateway:cluster-default=read', 'token:a=write']);
    expect(list.allows(CLUSTER_DEFAULT_PRINCIPAL, 'read')).toBe(true);
    expect(list.allows(CLUSTER_DEFAULT_PRINCIPAL, 'write')).toBe(false);
    expect(list.allows('token:a', 'read')).toBe(false);
    expect(list.allows('anonymous', 'read')).toBe(false);
    expect(list.allows('anonymous', 'gateway:cluster-default=read')).toBe(false);
  });
});
