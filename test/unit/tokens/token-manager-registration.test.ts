import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import { captureLogger, pairs, tokenConfig } from '../../helpers/token-fakes';
import { JobRefusedError } from '../../../src/plugin-kit/registration-error';

async function setup(names = ['a', 'b', 'c']) {
  const clock = new ManualClock();
  const cap = captureLogger();
  const { providers, receivers } = pairs(...names);
  const m = await DefaultTokenManager.create({ config: tokenConfig(), providers, receivers, log: cap.log, clock, random: () => 0.5 });
  return { clock, cap, providers, m };
}

const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';

/** docs/tokens.md edge cases 26–32: per-job registration. */
describe('token manager job registration', () => {
  it('row 26: a first registration failing part-way is rolled back on every provider, including ones never reached', async () => {
    const { m, providers, cap } = await setup();
    const cause = new JobRefusedError('container team-b is not on the allow-list');
    providers[1]!.register = () => {
      throw cause;
    };
    const err = await m.registerJob(J1, { 'x.y': 'z' }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: 'GW_TOKENS_REJECTED',
      status: 400,
      provider: 'b',
      message: "The delegation-token provider 'b' refused the job: container team-b is not on the allow-list. The job was not started.",
    });
    expect((err as Error).cause).toBe(cause);
    expect(providers.map((p) => p.registered.length)).toEqual([1, 1, 0]); // c never reached …
    expect(providers.map((p) => p.unregistered)).toEqual([[J1], [J1], [J1]]); // … but rolled back too
    expect(m.status().registeredJobs).toEqual([]);
    expect(m.status().lastError?.message).toMatch(/registration of job 1{32} failed in provider b/);
    expect(cap.messages('error')).toContain('Failed to register job for provider');
  });

  it('row 26: a failed first registration leaves other jobs alone', async () => {
    const { m, providers } = await setup();
    await m.registerJob(J1, {});
    providers[2]!.register = async () => {
      throw new JobRefusedError('no');
    };
    await expect(m.registerJob(J2, {})).rejects.toMatchObject({ provider: 'c' });
    expect(m.status().registeredJobs).toEqual([J1]);
    expect(providers[0]!.jobs.has(J1)).toBe(true);
  });

  it('row 27: a failed re-registration keeps the previous registration and rolls nothing back', async () => {
    const { m, providers, cap } = await setup();
    await m.registerJob(J1, {});
    providers[1]!.register = () => {
      throw new JobRefusedError('temporarily refused');
    };
    await expect(m.registerJob(J1, {})).rejects.toMatchObject({ code: 'GW_TOKENS_REJECTED', provider: 'b' });
    expect(m.status().registeredJobs).toEqual([J1]);
    expect(providers.map((p) => p.unregistered)).toEqual([[], [], []]);
    expect(cap.messages('error')).toContain('Failed to re-register job for provider, keeping the previous registration');
  });

  it('row 28: a failing rollback is logged, the original error wins, and the job stays untracked so the next failure rolls back again', async () => {
    const { m, providers, cap } = await setup();
    providers[1]!.register = () => {
      throw new JobRefusedError('refused by b');
    };
    providers[0]!.unregister = () => {
      throw new Error('rollback failed in a');
    };
    await expect(m.registerJob(J1, {})).rejects.toMatchObject({ provider: 'b', message: expect.stringContaining('refused by b') });
    expect(m.status().registeredJobs).toEqual([]);
    expect(cap.messages('error')).toContain('Failed to unregister job for provider');
    await expect(m.registerJob(J1, {})).rejects.toMatchObject({ provider: 'b' });
    expect(providers[0]!.unregistered).toEqual([J1, J1]);
  });

  it('row 29: a failing unregistration is logged per provider, the others continue, and the job is dropped anyway', async () => {
    const { m, providers, cap } = await setup();
    await m.registerJob(J1, {});
    providers[0]!.unregister = () => {
      throw new Error('cannot delete');
    };
    await expect(m.unregisterJob(J1)).resolves.toBeUndefined();
    expect(providers.map((p) => p.unregistered)).toEqual([[J1], [J1], [J1]]);
    expect(m.status().registeredJobs).toEqual([]);
    expect(cap.messages('error')).toContain('Failed to unregister job for provider');
  });

  it("row 30: re-registration calls every provider again (idempotency is the provider's job)", async () => {
    const { m, providers } = await setup();
    await m.registerJob(J1, {});
    await m.registerJob(J1, {});
    expect(providers.map((p) => p.registered.length)).toEqual([2, 2, 2]);
    expect(providers[0]!.jobs.size).toBe(1);
    expect(m.status().registeredJobs).toEqual([J1]);
  });

  it('row 31: a provider that records the job and then asks for a re-obtain gets exactly one extra cycle that sees the job', async () => {
    const { m, providers, clock } = await setup(['a']);
    const p = providers[0]!;
    const seen: string[][] = [];
    p.obtain = (n) => {
      seen.push([...p.jobs]);
      return { tokens: new Uint8Array([n]) };
    };
    p.registerJob = async (jobId) => {
      p.jobs.add(jobId); // state first …
      p.callback!.reobtainDelegationTokens(); // … then the request
    };
    await m.start();
    await m.registerJob(J1, {});
    await clock.advance(0);
    await clock.advance(60_000);
    expect(seen).toEqual([[], [J1]]);
    await m.close();
  });

  it('row 32: providers get a frozen copy of the job configuration', async () => {
    const { m, providers } = await setup(['a', 'b']);
    providers[0]!.register = (_id, conf) => {
      (conf as Record<string, string>)['injected'] = 'x';
    };
    const original = { 'parallelism.default': '2' };
    // Writing to the frozen copy throws in strict mode: that provider refuses, nothing leaks.
    await expect(m.registerJob(J1, original)).rejects.toMatchObject({ provider: 'a' });
    providers[0]!.register = undefined;
    await m.registerJob(J1, original);
    const conf = providers[1]!.registered[0]!.conf;
    expect(conf).toEqual(original);
    expect(conf).not.toBe(original);
    expect(Object.isFrozen(conf)).toBe(true);
    expect(original).toEqual({ 'parallelism.default': '2' });
  });

  it('registration works before start() and does not itself trigger a cycle', async () => {
    const { m, providers } = await setup(['a']);
    await m.registerJob(J1, {});
    expect(providers[0]!.obtains).toBe(0);
    expect(m.status().registeredJobs).toEqual([J1]);
  });

  it('refuses registrations once closed (the providers are gone)', async () => {
    const { m, providers } = await setup(['a']);
    await m.close();
    await expect(m.registerJob(J1, {})).rejects.toMatchObject({ code: 'GW_TOKENS_REJECTED', provider: '<manager>' });
    expect(providers[0]!.registered).toEqual([]);
  });
});
