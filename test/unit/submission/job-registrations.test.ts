import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobRegistrations, redactConfiguration } from '../../../src/submission/job-registrations';
import { FileRegistrationStore } from '../../../src/submission/registration-store';
import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { NoopTokenManager } from '../../../src/tokens/noop-token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import { captureLogger, pairs, tokenConfig } from '../../helpers/token-fakes';
import { JobRefusedError } from '../../../src/plugin-kit/registration-error';

const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';
const J3 = '33333333333333333333333333333333';

describe('job registrations (token manager + store)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-regs-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  async function setup(names = ['a', 'b']) {
    const cap = captureLogger();
    const config = tokenConfig();
    const { providers, receivers } = pairs(...names);
    const tokens = await DefaultTokenManager.create({ config, providers, receivers, log: cap.log, clock: new ManualClock() });
    const store = new FileRegistrationStore(dir, cap.log);
    await store.init();
    const regs = new JobRegistrations({ tokens, store, isSensitive: (k) => config.registry.isSensitive(k), log: cap.log });
    return { cap, providers, tokens, store, regs };
  }

  const jobConfig = {
    'parallelism.default': '2',
    's3.secret-key': 'SECRET-1',
    's3.access-key': 'AKIA-SECRET-2',
    'fs.azure.account.key.acct.blob.core.windows.net': 'SECRET-3',
    'my.app.password': 'SECRET-4',
    'oauth2.client.token': 'SECRET-5',
    'gateway.artifact.uri': 's3://bucket/app.jar',
    'gateway.artifact.sha256': 'ab'.repeat(32),
  };

  it('a later request with another configuration never changes an existing registration', async () => {
    const { providers, regs, store, cap } = await setup();
    await regs.register(J1, { 'security.delegation.job.azure-blob.containers': 'victim' }, cap.log, 'token:victim');
    regs.submitted(J1);
    // Providers see who submitted (allow-lists per principal), and the store keeps it for restarts.
    expect(providers[0]!.registered[0]!.principal).toBe('token:victim');
    expect(store.get(J1)?.principal).toBe('token:victim');
    await expect(regs.register(J1, { 'security.delegation.job.azure-blob.containers': 'attacker' }, cap.log)).rejects.toMatchObject({
      code: 'GW_RUN_JOB_ID_CONFLICT',
      status: 409,
    });
    expect(providers[0]!.registered.map((r) => r.conf['security.delegation.job.azure-blob.containers'])).toEqual(['victim']);
    expect(store.get(J1)?.configuration).toEqual({ 'security.delegation.job.azure-blob.containers': 'victim' });
    // The identical request (a retry) may register again.
    await regs.register(J1, { 'security.delegation.job.azure-blob.containers': 'victim' }, cap.log);
    // A registration restored from the store after a restart is held to the same rule.
    const again = new JobRegistrations({ tokens: (await setup()).tokens, store, isSensitive: () => false, log: cap.log });
    await expect(again.register(J1, { 'security.delegation.job.azure-blob.containers': 'attacker' }, cap.log)).rejects.toMatchObject({
      code: 'GW_RUN_JOB_ID_CONFLICT',
    });
  });

  it('row 32: providers and the store get a copy without sensitive values; provenance is kept apart', async () => {
    const { providers, regs, store, cap } = await setup();
    await regs.register(J1, jobConfig, cap.log);
    const seen = providers[0]!.registered[0]!.conf;
    expect(seen).toEqual({
      'parallelism.default': '2',
      'gateway.artifact.uri': 's3://bucket/app.jar',
      'gateway.artifact.sha256': 'ab'.repeat(32),
    });
    const text = readFileSync(store.file, 'utf8');
    expect(text).not.toMatch(/SECRET/);
    expect(store.get(J1)).toMatchObject({
      provenance: { 'gateway.artifact.uri': 's3://bucket/app.jar', 'gateway.artifact.sha256': 'ab'.repeat(32) },
    });
    expect(redactConfiguration({ 'sas.token': 'x', a: 'b' }, (k) => k.includes('token'))).toEqual({ a: 'b' });
  });

  it('a refused registration is GW_TOKENS_REJECTED, stored nowhere, and the watcher never sees it', async () => {
    const { providers, regs, store, cap } = await setup();
    providers[1]!.register = () => {
      throw new JobRefusedError('role arn:aws:iam::1:role/x is not allowed');
    };
    await expect(regs.register(J1, {}, cap.log)).rejects.toMatchObject({ code: 'GW_TOKENS_REJECTED', provider: 'b' });
    expect(store.list()).toEqual([]);
    expect(regs.watchedJobs()).toEqual([]);
    expect(providers[0]!.unregistered).toEqual([J1]);
  });

  it('a job is watched only once its run reached the JobManager; rollback undoes everything', async () => {
    const { providers, regs, store, tokens, cap } = await setup();
    await regs.register(J1, {}, cap.log);
    expect(regs.watchedJobs()).toEqual([]); // run in flight
    regs.submitted(J1);
    expect(regs.watchedJobs()).toEqual([J1]);
    await regs.register(J2, {}, cap.log);
    await regs.rollback(J2, cap.log);
    expect(providers[0]!.unregistered).toEqual([J2]);
    expect(store.list().map((r) => r.jobId)).toEqual([J1]);
    expect(tokens.status().registeredJobs).toEqual([J1]);
    await regs.unregister(J1, 'job FINISHED');
    expect(store.list()).toEqual([]);
    expect(regs.watchedJobs()).toEqual([]);
  });

  it('a refused retry keeps the registration of an earlier attempt (it may have started the job) and hands it to the watcher', async () => {
    const { providers, regs, store, tokens, cap } = await setup();
    await regs.register(J1, {}, cap.log);
    regs.submitted(J1); // e.g. the first run timed out: outcome unknown
    await regs.register(J1, {}, cap.log); // the client retries with the same jobId
    expect(regs.watchedJobs()).toEqual([]); // retry in flight
    await regs.rollback(J1, cap.log); // ...and the JobManager refuses it
    expect(providers[0]!.unregistered).toEqual([]);
    expect(tokens.status().registeredJobs).toEqual([J1]);
    expect(store.list().map((r) => r.jobId)).toEqual([J1]);
    expect(regs.watchedJobs()).toEqual([J1]);
    // A fresh registration that fails is still rolled back.
    await regs.register(J2, {}, cap.log);
    await regs.rollback(J2, cap.log);
    expect(providers[0]!.unregistered).toEqual([J2]);
  });

  it('restores at start: running jobs are registered again, ended ones dropped, unknown ones kept as absent (providers told of both)', async () => {
    const first = await setup();
    for (const j of [J1, J2, J3]) await first.regs.register(j, { 'parallelism.default': j.slice(0, 1) }, first.cap.log);

    const second = await setup();
    await second.regs.restore(
      async () =>
        new Map([
          [J1, 'RUNNING'],
          [J2, 'FINISHED'],
        ]),
    );
    expect(second.regs.watchedJobs()).toEqual([J1]);
    expect(second.providers[0]!.registered).toEqual([{ jobId: J1, conf: { 'parallelism.default': '1' }, principal: 'anonymous' }]);
    expect(second.providers[0]!.unregistered.sort()).toEqual([J2, J3]);
    // A JobManager still recovering its jobs does not list them yet: J3's record stays, marked absent.
    expect(second.store.list().map((r) => [r.jobId, r.absentSince !== undefined])).toEqual([
      [J1, false],
      [J3, true],
    ]);
  });

  it("a job absent for longer than the watcher's grace comes back with its stored registration, never as discovered", async () => {
    const { providers, regs, store, cap } = await setup();
    await regs.register(J1, { 'security.delegation.job.a.scope': 'team-a' }, cap.log, 'token:team-a');
    regs.submitted(J1);
    await regs.absent(J1, 'job missing from the JobManager');
    expect(regs.watchedJobs()).toEqual([]);
    expect(providers[0]!.unregistered).toEqual([J1]);
    expect(store.get(J1)).toMatchObject({ principal: 'token:team-a', absentSince: expect.any(String) });
    // Not a job nobody registered: isKnown stays false only while it is absent; the read that lists it registers it first.
    await regs.recheckAbsent(new Map([[J1, 'RUNNING']]));
    expect(regs.isKnown(J1)).toBe(true);
    expect(regs.list()).toEqual([expect.objectContaining({ jobId: J1, principal: 'token:team-a', source: 'submitted' })]);
    expect(providers[0]!.registered.map((r) => [r.jobId, r.conf, r.principal])).toEqual([
      [J1, { 'security.delegation.job.a.scope': 'team-a' }, 'token:team-a'],
      [J1, { 'security.delegation.job.a.scope': 'team-a' }, 'token:team-a'],
    ]);
    expect(store.get(J1)?.absentSince).toBeUndefined();
  });

  it('an absent job that ended, or stayed away past the retention, is dropped from the store', async () => {
    const cap = captureLogger();
    const config = tokenConfig();
    const { providers, receivers } = pairs('a');
    const tokens = await DefaultTokenManager.create({ config, providers, receivers, log: cap.log, clock: new ManualClock() });
    const store = new FileRegistrationStore(dir, cap.log);
    await store.init();
    let now = Date.UTC(2026, 0, 1);
    const regs = new JobRegistrations({
      tokens,
      store,
      isSensitive: () => false,
      log: cap.log,
      wallClock: () => now,
      absentRetentionMs: 3_600_000,
    });
    for (const j of [J1, J2]) {
      await regs.register(j, {}, cap.log);
      regs.submitted(j);
      await regs.absent(j, 'gone');
    }
    await regs.recheckAbsent(new Map([[J1, 'FINISHED']]));
    expect(store.list().map((r) => r.jobId)).toEqual([J2]);
    now += 3_600_000 - 1;
    await regs.recheckAbsent(new Map());
    expect(store.list().map((r) => r.jobId)).toEqual([J2]);
    now += 1;
    await regs.recheckAbsent(new Map());
    expect(store.list()).toEqual([]);
  });

  it('restores every stored job when the JobManager cannot be read (the watcher sorts them out later)', async () => {
    const first = await setup();
    for (const j of [J1, J2]) await first.regs.register(j, {}, first.cap.log);
    const second = await setup();
    await second.regs.restore(async () => {
      throw new Error('ECONNREFUSED');
    });
    expect(second.regs.watchedJobs().sort()).toEqual([J1, J2]);
    expect(second.cap.messages('warn').join('\n')).toMatch(/registering every stored job again/);
  });

  it('retries a running job whose re-registration a provider refuses, with backoff, and shows it (fidelity item 14)', async () => {
    const first = await setup();
    await first.regs.register(J1, { a: '1' }, first.cap.log, 'token:ci');
    const clock = new ManualClock();
    const cap = captureLogger();
    const config = tokenConfig();
    const { providers, receivers } = pairs('a');
    const tokens = await DefaultTokenManager.create({ config, providers, receivers, log: cap.log, clock });
    const store = new FileRegistrationStore(dir, cap.log);
    await store.init();
    const regs = new JobRegistrations({ tokens, store, isSensitive: () => false, log: cap.log, clock });
    let refusals = 3;
    providers[0]!.register = () => {
      if (refusals-- > 0) throw new JobRefusedError('the role is being rotated');
    };
    await regs.restore(async () => new Map([[J1, 'RUNNING']]));
    // Kept (the job runs and needs its tokens), followed by the watcher, shown with its next retry.
    expect(store.list().map((r) => r.jobId)).toEqual([J1]);
    expect(regs.watchedJobs()).toEqual([J1]);
    expect(regs.pendingRestores()).toEqual([
      { jobId: J1, attempts: 1, lastError: expect.stringContaining('the role is being rotated'), nextRetryAt: expect.any(String) },
    ]);
    expect(cap.messages('error').join('\n')).toMatch(/could not be registered again/);
    await clock.advance(1_000); // 2nd attempt refused
    await clock.advance(2_000); // 3rd attempt refused
    expect(regs.pendingRestores()[0]!.attempts).toBe(3);
    await clock.advance(3_999);
    expect(regs.pendingRestores()).toHaveLength(1);
    await clock.advance(1); // 4th attempt, 4 s after the 3rd: accepted
    expect(regs.pendingRestores()).toEqual([]);
    expect(regs.list().map((j) => j.jobId)).toEqual([J1]);
    expect(providers[0]!.registered.at(-1)).toMatchObject({ jobId: J1, principal: 'token:ci' });
  });

  it('stops retrying once the job ended', async () => {
    const first = await setup();
    await first.regs.register(J2, {}, first.cap.log);
    const clock = new ManualClock();
    const { providers, receivers } = pairs('a');
    const cap = captureLogger();
    const tokens = await DefaultTokenManager.create({ config: tokenConfig(), providers, receivers, log: cap.log, clock });
    const store = new FileRegistrationStore(dir, cap.log);
    await store.init();
    const regs = new JobRegistrations({ tokens, store, isSensitive: () => false, log: cap.log, clock });
    providers[0]!.register = () => {
      throw new JobRefusedError('refused');
    };
    await regs.restore(async () => new Map([[J2, 'RUNNING']]));
    await regs.unregister(J2, 'the job reached FINISHED');
    expect(regs.pendingRestores()).toEqual([]);
    const calls = providers[0]!.registered.length;
    await clock.advance(60_000);
    expect(providers[0]!.registered.length).toBe(calls);
    expect(store.list()).toEqual([]);
  });

  it('does nothing (no store, no tracking) when delegation tokens are disabled', async () => {
    const cap = captureLogger();
    const regs = new JobRegistrations({ tokens: new NoopTokenManager(), isSensitive: () => false, log: cap.log });
    await regs.register(J1, {}, cap.log);
    regs.submitted(J1);
    expect(regs.watchedJobs()).toEqual([]);
  });
});
