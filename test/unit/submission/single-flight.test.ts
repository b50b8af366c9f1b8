import { SingleFlight } from '../../../src/submission/single-flight';

describe('SingleFlight (runs by jobId)', () => {
  it('shares an in-flight run', async () => {
    const sf = new SingleFlight<string>(1000, { monotonicMs: () => 0 });
    let calls = 0;
    let release!: (v: string) => void;
    const fn = () => {
      calls++;
      return new Promise<string>((r) => (release = r));
    };
    const a = sf.run('job', fn);
    const b = sf.run('job', fn);
    release('first');
    expect(await a).toEqual({ value: 'first', shared: false });
    expect(await b).toEqual({ value: 'first', shared: true });
    expect(calls).toBe(1);
  });

  it('remembers an accepted run for the retention period, on the injected clock', async () => {
    let now = 0;
    const sf = new SingleFlight<number>(1000, { monotonicMs: () => now });
    let calls = 0;
    const fn = async () => ++calls;
    await sf.run('job', fn);
    now = 999;
    expect(await sf.run('job', fn)).toEqual({ value: 1, shared: true });
    now = 2500;
    expect(await sf.run('job', fn)).toEqual({ value: 2, shared: false });
  });

  it('forgets failures so that a retry really retries', async () => {
    const sf = new SingleFlight<string>(1000, { monotonicMs: () => 0 });
    await expect(sf.run('job', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await sf.run('job', async () => 'ok')).toEqual({ value: 'ok', shared: false });
  });
});
