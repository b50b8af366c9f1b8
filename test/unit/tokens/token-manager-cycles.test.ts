import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import {
  bytes,
  captureLogger,
  deferred,
  type FakeProvider,
  type FakeReceiver,
  pairs,
  RecordingListener,
  tokenConfig,
} from '../../helpers/token-fakes';

const S = 1000;
const MIN = 60 * S;
const DAY = 24 * 60 * MIN;

async function setup(names: string[], options: Record<string, string> = {}) {
  const clock = new ManualClock();
  const cap = captureLogger();
  const { providers, receivers } = pairs(...names);
  const m = await DefaultTokenManager.create({
    config: tokenConfig(options),
    providers,
    receivers,
    log: cap.log,
    clock,
    random: () => 0.5,
  });
  const listener = new RecordingListener();
  return { clock, cap, providers, receivers, m, listener };
}

const validFor = (clock: ManualClock, p: FakeProvider, ms: number) => {
  p.obtain = (n) => ({ tokens: bytes(`${p.serviceName}-${n}`), validUntil: clock.wallMs() + ms });
};

/** docs/tokens.md edge cases 7–14, 37: obtain cycles, distribution and renewal timing. */
describe('token manager obtain cycles', () => {
  it('ratio: renews at 0.75 × the earliest validUntil; providers without one do not constrain it', async () => {
    const { clock, providers, receivers, m, listener } = await setup(['a', 'b', 'c']);
    validFor(clock, providers[0]!, 100 * S);
    validFor(clock, providers[1]!, 200 * S);
    await m.start(listener);
    expect(listener.containers).toEqual([{ a: 'a-1', b: 'b-1', c: 'c-1' }]);
    expect(receivers.map((r: FakeReceiver) => r.received)).toEqual([['a-1'], ['b-1'], ['c-1']]);
    expect(clock.pending()).toEqual([75 * S]);
    expect(m.status().nextRenewalAt).toBe(new Date(clock.wallMs() + 75 * S).toISOString());
    await clock.advance(75 * S - 1);
    expect(providers[0]!.obtains).toBe(1);
    await clock.advance(1);
    expect(providers.map((p) => p.obtains)).toEqual([2, 2, 2]);
    expect(clock.pending()).toEqual([75 * S]);
    await m.close();
  });

  it('ratio: follows security.delegation.tokens.renewal.time-ratio', async () => {
    const { clock, providers, m } = await setup(['a'], { 'security.delegation.tokens.renewal.time-ratio': '0.5' });
    validFor(clock, providers[0]!, 100 * S);
    await m.start();
    expect(clock.pending()).toEqual([50 * S]);
    await m.close();
  });

  it('row 7: a provider that needs no tokens is skipped for that cycle only', async () => {
    const { clock, providers, receivers, m, listener } = await setup(['a', 'b']);
    validFor(clock, providers[0]!, 100 * S);
    let needed = false;
    providers[1]!.required = () => needed;
    await m.start(listener);
    expect(listener.containers).toEqual([{ a: 'a-1' }]);
    needed = true;
    await clock.advance(75 * S);
    expect(listener.containers[1]).toEqual({ a: 'a-2', b: 'b-1' });
    expect(receivers[1]!.received).toEqual(['b-1']);
    await m.close();
  });

  it('row 8: a provider returning nothing fails the cycle', async () => {
    const { providers, m, listener, clock } = await setup(['a']);
    providers[0]!.obtain = () => null as never;
    await m.start(listener);
    expect(listener.containers).toEqual([]);
    expect(m.status().providers[0]!.lastError).toBe('Obtained delegation tokens must not be null');
    expect(clock.pending()).toEqual([10 * S]);
    await m.close();
  });

  it('row 8: a validUntil that is not a number fails the cycle instead of spinning', async () => {
    const { providers, m, clock } = await setup(['a']);
    providers[0]!.obtain = () => ({ tokens: bytes('x'), validUntil: Number.NaN });
    await m.start();
    expect(clock.pending()).toEqual([10 * S]);
    await m.close();
  });

  it('row 9: one failing provider fails the whole round, nothing partial is distributed, and the round is retried with backoff', async () => {
    const { clock, providers, receivers, m, listener, cap } = await setup(['a', 'b', 'c']);
    validFor(clock, providers[0]!, 1000 * S);
    let failures = 2;
    providers[1]!.obtain = (n) => {
      if (failures-- > 0) throw new Error(`STS unreachable (${n})`);
      return { tokens: bytes(`b-${n}`) };
    };
    await m.start(listener);
    expect(listener.containers).toEqual([]);
    expect(receivers.map((r) => r.received.length)).toEqual([0, 0, 0]);
    expect(providers[2]!.obtains).toBe(0); // fail-fast: the round stopped at b
    expect(clock.pending()).toEqual([10 * S]);
    expect(m.status().providers[1]!.lastError).toBe('STS unreachable (1)');
    expect(m.status().lastError?.message).toMatch(/obtain cycle failed: provider b: STS unreachable \(1\)/);
    await clock.advance(10 * S);
    expect(clock.pending()).toEqual([20 * S]);
    await clock.advance(20 * S);
    expect(listener.containers).toEqual([{ a: 'a-3', b: 'b-3', c: 'c-1' }]);
    expect(m.status().providers[1]!.lastError).toBeUndefined();
    // Success resets the backoff; the next timer is the periodic renewal.
    expect(clock.pending()).toEqual([750 * S]);
    expect(cap.messages('warn')).toContain('Failed to update tokens, will try again');
    await m.close();
  });

  it('row 9: a synchronous throw or a thrown non-Error is caught like any failure', async () => {
    const { providers, m, clock } = await setup(['a', 'b']);
    providers[0]!.delegationTokensRequired = () => {
      throw 'not an Error';
    };
    await m.start();
    expect(m.status().providers[0]!.lastError).toBe('not an Error');
    expect(clock.pending()).toEqual([10 * S]);
    await m.close();
  });

  it('row 10: zero providers, or no validUntil anywhere, schedules no periodic task; on-demand re-obtain still runs', async () => {
    const none = await setup([]);
    await none.m.start(none.listener);
    expect(none.clock.pending()).toEqual([]);
    expect(none.cap.messages('warn')).toContain('No tokens obtained so skipping notifications');
    await none.m.close();

    const { clock, providers, m, listener, cap } = await setup(['a']);
    await m.start(listener);
    expect(clock.pending()).toEqual([]);
    expect(cap.messages('warn')).toContain(
      'Tokens update task not started because either no tokens obtained or none of the tokens specified its renewal date',
    );
    m.reobtainDelegationTokens();
    await clock.advance(0);
    expect(providers[0]!.obtains).toBe(2);
    expect(listener.containers).toHaveLength(2);
    await m.close();
  });

  it('row 11: an expired token (negative delay) renews at once: the delay is clamped to 0', async () => {
    const { clock, providers, m } = await setup(['a']);
    providers[0]!.obtain = (n) => ({ tokens: bytes(`a-${n}`), validUntil: n === 1 ? clock.wallMs() - 60 * S : clock.wallMs() + 100 * S });
    await m.start();
    expect(clock.pending()).toEqual([0]);
    expect(m.status().nextRenewalAt).toBe(new Date(clock.wallMs()).toISOString());
    await clock.advance(0);
    expect(providers[0]!.obtains).toBe(2);
    expect(clock.pending()).toEqual([75 * S]);
    await m.close();
  });

  it("row 11: a renewal beyond Node's 24.8-day timer limit is chained, never fired early", async () => {
    const { clock, providers, m } = await setup(['a']);
    validFor(clock, providers[0]!, 40 * DAY); // renewal after 30 days
    await m.start();
    await clock.advance(1);
    await clock.advance(25 * DAY);
    expect(providers[0]!.obtains).toBe(1);
    await clock.advance(5 * DAY - 1 - 1);
    expect(providers[0]!.obtains).toBe(1);
    await clock.advance(1);
    expect(providers[0]!.obtains).toBe(2);
    expect(clock.overlongTimers).toBe(0);
    await m.close();
  });

  it('row 12: a retry near expiry is capped at a third of the remaining validity', async () => {
    const { clock, providers, m } = await setup(['a'], { 'security.delegation.tokens.renewal.retry.initial.backoff': '1 min' });
    providers[0]!.obtain = (n) => {
      if (n > 1) throw new Error('down');
      return { tokens: bytes('a'), validUntil: clock.wallMs() + 40 * S };
    };
    await m.start();
    expect(clock.pending()).toEqual([30 * S]);
    await clock.advance(30 * S); // 10 s of validity left: retry within 10/3 s, not after 1 min
    expect(clock.pending()).toEqual([3333]);
    await clock.advance(3333); // 6.67 s left
    expect(clock.pending()).toEqual([2222]);
    await m.close();
  });

  it('row 13: a failing listener fails the cycle; the retry obtains all tokens again', async () => {
    const { clock, providers, m, listener } = await setup(['a', 'b']);
    listener.fail = new Error('broadcast failed');
    await m.start(listener);
    expect(clock.pending()).toEqual([10 * S]);
    listener.fail = undefined;
    await clock.advance(10 * S);
    expect(listener.containers).toEqual([{ a: 'a-2', b: 'b-2' }]);
    expect(providers.map((p) => p.obtains)).toEqual([2, 2]);
    await m.close();
  });

  it('row 14: one receiver throwing is logged and the others still get their tokens', async () => {
    const { receivers, m, listener, cap } = await setup(['a', 'b']);
    receivers[0]!.onNew = () => {
      throw new Error('cannot apply');
    };
    await m.start(listener);
    expect(receivers[1]!.received).toEqual(['b-1']);
    expect(listener.containers).toHaveLength(1);
    expect(cap.messages('warn')).toContain('Failed to send tokens to delegation token receiver');
    await m.close();
  });

  it('row 37: expiries are read on the wall clock, delays on the monotonic clock', async () => {
    const { clock, providers, m } = await setup(['a']);
    validFor(clock, providers[0]!, 100 * S);
    await m.start();
    // A wall-clock step does not move a pending timer: it is measured on the monotonic clock.
    clock.jumpWall(-3600 * S);
    await clock.advance(75 * S);
    expect(providers[0]!.obtains).toBe(2);
    // The new validUntil is on the stepped wall clock; the ratio applies to what is left of it.
    expect(clock.pending()).toEqual([75 * S]);
    await m.close();
  });

  it('row 40: never shows a token value in its status or its logs', async () => {
    const { clock, providers, m, cap } = await setup(['a']);
    providers[0]!.obtain = () => ({ tokens: bytes('SECRET-TOKEN-VALUE'), validUntil: clock.wallMs() + 100 * S });
    await m.start();
    await m.registerJob('0123456789abcdef0123456789abcdef', {});
    const status = m.status();
    expect(JSON.stringify(status)).not.toContain('SECRET-TOKEN-VALUE');
    expect(cap.lines.length).toBeGreaterThanOrEqual(3);
    expect(JSON.stringify(cap.lines)).not.toMatch(/SECRET-TOKEN-VALUE|U0VDUkVULVRPS0VOLVZBTFVF/); // nor its base64
    expect(status).toMatchObject({
      enabled: true,
      providers: [
        {
          serviceName: 'a',
          lastObtainAt: new Date(clock.wallMs()).toISOString(),
          validUntil: new Date(clock.wallMs() + 100 * S).toISOString(),
        },
      ],
      registeredJobs: ['0123456789abcdef0123456789abcdef'],
    });
    await m.close();
  });

  it('an obtain that takes long still renews relative to when it finished', async () => {
    const { clock, providers, m } = await setup(['a']);
    const d = deferred<void>();
    providers[0]!.obtain = async (n) => {
      const validUntil = clock.wallMs() + 100 * S;
      if (n === 2) await d.promise;
      return { tokens: bytes('a'), validUntil };
    };
    await m.start();
    await clock.advance(75 * S);
    await clock.advance(20 * S); // the obtain started at 75 s took 20 s
    d.resolve();
    await clock.advance(0);
    expect(clock.pending()).toEqual([60 * S]); // 0.75 × (100 − 20)
    await m.close();
  });
});
