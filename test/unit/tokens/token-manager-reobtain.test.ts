import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import { bytes, captureLogger, deferred, pairs, RecordingListener, tokenConfig } from '../../helpers/token-fakes';

const S = 1000;

async function setup(options: Record<string, string> = {}) {
  const clock = new ManualClock();
  const cap = captureLogger();
  const { providers, receivers } = pairs('a');
  const m = await DefaultTokenManager.create({
    config: tokenConfig(options),
    providers,
    receivers,
    log: cap.log,
    clock,
    random: () => 0.5,
  });
  return { clock, cap, p: providers[0]!, m, listener: new RecordingListener() };
}

/** docs/tokens.md edge cases 19–24: on-demand re-obtain, coalescing and cooldown. */
describe('token manager re-obtain: coalescing and cooldown', () => {
  it('row 21: N requests while one is pending become one cycle', async () => {
    const { clock, p, m } = await setup();
    await m.start();
    for (let i = 0; i < 10; i++) m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([0]);
    await clock.advance(0);
    expect(p.obtains).toBe(2);
    await clock.advance(120 * S);
    expect(p.obtains).toBe(2);
    await m.close();
  });

  it('row 21: requests made while the serving cycle runs stay coalesced into one more cycle (flag cleared at cycle start)', async () => {
    const { clock, p, m } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '0 ms' });
    await m.start();
    const gate = deferred<void>();
    p.obtain = async (n) => {
      if (n === 2) await gate.promise;
      return { tokens: bytes(`a-${n}`) };
    };
    m.reobtainDelegationTokens();
    await clock.advance(0); // cycle 2 started and waits in obtain
    for (let i = 0; i < 5; i++) m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([0]);
    await clock.advance(0); // its timer fires; the cycle queues behind cycle 2
    for (let i = 0; i < 5; i++) m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([]);
    gate.resolve();
    await clock.advance(0);
    expect(p.obtains).toBe(3);
    await m.close();
  });

  it('row 22: the first request after a quiet period runs at once; the cooldown is measured from the START of the serving cycle', async () => {
    const { clock, p, m } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '60 s' });
    await m.start();
    const gate = deferred<void>();
    p.obtain = async (n) => {
      if (n === 2) await gate.promise;
      return { tokens: bytes(`a-${n}`) };
    };
    m.reobtainDelegationTokens();
    await clock.advance(0); // serving cycle starts at t0 …
    await clock.advance(10 * S);
    gate.resolve(); // … and ends at t0 + 10 s
    await clock.advance(0);
    m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([50 * S]); // t0 + 60 s, not end + 60 s
    await clock.advance(50 * S - 1);
    expect(p.obtains).toBe(2);
    await clock.advance(1);
    expect(p.obtains).toBe(3);
    // The next request is again spaced from that cycle's start.
    await clock.advance(1 * S);
    m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([59 * S]);
    await m.close();
  });

  it('row 22: a request after the window has elapsed runs at once', async () => {
    const { clock, p, m } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '60 s' });
    await m.start();
    m.reobtainDelegationTokens();
    await clock.advance(0);
    await clock.advance(70 * S);
    m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([0]);
    await clock.advance(0);
    expect(p.obtains).toBe(3);
    await m.close();
  });

  it('row 22: periodic cycles without pending demand do not move the cooldown anchor', async () => {
    const { clock, p, m } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '60 s' });
    // Renewal after 30 s at first, then after 750 s.
    p.obtain = (n) => ({ tokens: bytes(`a-${n}`), validUntil: clock.wallMs() + (n <= 2 ? 40 : 1000) * S });
    await m.start();
    m.reobtainDelegationTokens();
    await clock.advance(0); // demand served at t0: anchor t0
    await clock.advance(30 * S); // periodic cycle at t0+30 s, no demand
    expect(p.obtains).toBe(3);
    await clock.advance(5 * S);
    m.reobtainDelegationTokens();
    // Measured from t0 (due at t0+60 s), not from the periodic cycle (which would give t0+90 s).
    expect(clock.pending()).toEqual([25 * S]);
    await m.close();
  });

  it('row 22: the cooldown never delays a pending periodic cycle', async () => {
    const { clock, p, m } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '300 s' });
    p.obtain = (n) => ({ tokens: bytes(`a-${n}`), validUntil: clock.wallMs() + 100 * S });
    await m.start(); // periodic renewal due at 75 s
    await clock.advance(1 * S);
    m.reobtainDelegationTokens();
    await clock.advance(0); // served at 1 s: anchor 1 s; periodic now due at 76 s
    await clock.advance(1 * S);
    m.reobtainDelegationTokens(); // cooldown says 299 s; the pending renewal says 74 s
    expect(clock.pending()).toEqual([74 * S]);
    await m.close();
  });

  it('row 23: a finishing periodic cycle never replaces a sooner pending on-demand timer', async () => {
    const { clock, p, m } = await setup();
    const gate = deferred<void>();
    p.obtain = async (n) => {
      if (n === 2) await gate.promise;
      return { tokens: bytes(`a-${n}`), validUntil: clock.wallMs() + 100 * S };
    };
    await m.start();
    await clock.advance(75 * S); // periodic cycle 2 starts and waits
    m.reobtainDelegationTokens(); // no anchor yet: due now
    expect(clock.pending()).toEqual([0]);
    gate.resolve(); // cycle 2 finishes and wants a renewal in 75 s
    await clock.advance(0);
    expect(p.obtains).toBe(3); // the on-demand cycle still ran at once
    await m.close();
  });

  it('row 23: a sooner failure retry brings a cooldown-deferred demand forward', async () => {
    const { clock, p, m } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '60 s' });
    await m.start();
    const gate = deferred<void>();
    p.obtain = async (n) => {
      if (n === 2) await gate.promise;
      return { tokens: bytes(`a-${n}`) };
    };
    m.reobtainDelegationTokens();
    await clock.advance(0); // served cycle starts at t0 (anchor) and waits
    await clock.advance(10 * S);
    m.reobtainDelegationTokens(); // deferred by the cooldown to t0 + 60 s
    expect(clock.pending()).toEqual([50 * S]);
    gate.reject(new Error('down')); // the running cycle fails: retry in 10 s < 50 s
    await clock.advance(0);
    expect(clock.pending()).toEqual([10 * S]);
    await clock.advance(10 * S);
    expect(p.obtains).toBe(3);
    // That cycle served the demand: it is the new anchor (t0 + 20 s).
    await clock.advance(1 * S);
    m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([59 * S]);
    await m.close();
  });

  it('row 24 (injected scheduler fault): a failed scheduling clears the coalescing flag; later requests still work', async () => {
    const { clock, p, m, cap } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '60 s' });
    await m.start();
    clock.failNextSetTimer = new Error('scheduler broken');
    expect(() => m.reobtainDelegationTokens()).toThrow('scheduler broken');
    expect(cap.messages('error')).toContain('Failed to schedule tokens update task');
    m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([0]); // not coalesced into the failed attempt, and no cooldown started
    await clock.advance(0);
    expect(p.obtains).toBe(2);
    await m.close();
  });

  it('row 20: requests before start and after stop are ignored', async () => {
    const { clock, p, m } = await setup();
    p.callback!.reobtainDelegationTokens(); // providers hold the callback from init on
    expect(clock.pending()).toEqual([]);
    await m.start();
    await m.stop();
    m.reobtainDelegationTokens();
    expect(clock.pending()).toEqual([]);
    await clock.advance(60 * S);
    expect(p.obtains).toBe(1);
    await m.close();
  });

  it('row 19: a new session starts with no cooldown anchor and a fresh backoff', async () => {
    const { clock, p, m } = await setup({ 'security.delegation.tokens.reobtain.cooldown': '60 s' });
    await m.start();
    m.reobtainDelegationTokens();
    await clock.advance(0);
    let fail = true;
    p.obtain = (n) => {
      if (fail) throw new Error('down');
      return { tokens: bytes(`a-${n}`) };
    };
    await clock.advance(1 * S);
    m.reobtainDelegationTokens();
    await clock.advance(59 * S); // fails: backoff 10 s, next 20 s
    await clock.advance(10 * S);
    expect(clock.pending()).toEqual([20 * S]);
    await m.stop();
    expect(clock.pending()).toEqual([]);
    await m.start(); // fails again: backoff starts at 10 s again
    expect(clock.pending()).toEqual([10 * S]);
    fail = false;
    await clock.advance(10 * S);
    m.reobtainDelegationTokens(); // no anchor in this session yet
    expect(clock.pending()).toEqual([0]);
    await m.close();
  });
});
