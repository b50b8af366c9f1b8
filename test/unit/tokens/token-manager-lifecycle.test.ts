import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import { bytes, captureLogger, deferred, pairs, RecordingListener, tokenConfig } from '../../helpers/token-fakes';

const S = 1000;

async function setup(names = ['a', 'b']) {
  const clock = new ManualClock();
  const cap = captureLogger();
  const { providers, receivers } = pairs(...names);
  const m = await DefaultTokenManager.create({
    config: tokenConfig({ 'security.delegation.tokens.reobtain.cooldown': '0 ms' }),
    providers,
    receivers,
    log: cap.log,
    clock,
    random: () => 0.5,
  });
  return { clock, cap, providers, receivers, m };
}

/** docs/tokens.md edge cases 15–19, 34, 35: sessions, stale cycles, close. */
describe('token manager lifecycle', () => {
  it('row 15: a redundant start warns and keeps the first listener', async () => {
    const { m, cap, clock } = await setup();
    const first = new RecordingListener();
    const second = new RecordingListener();
    await m.start(first);
    await m.start(second);
    m.reobtainDelegationTokens();
    await clock.advance(0);
    expect(cap.messages('warn')).toContain('DelegationTokenManager is already started, ignoring redundant start()');
    expect(second.containers).toEqual([]);
    expect(first.containers.length).toBeGreaterThan(0);
    await m.close();
  });

  it('row 16: close is idempotent and closes providers exactly once; start after close fails', async () => {
    const { m, providers } = await setup();
    await m.start();
    await Promise.all([m.close(), m.close()]);
    await m.close();
    expect(providers.map((p) => p.closes)).toEqual([1, 1]);
    await expect(m.start()).rejects.toThrow(/already closed, its providers are closed/);
  });

  it('row 16: a provider whose close throws does not stop the others from closing', async () => {
    const { m, providers, cap } = await setup();
    providers[0]!.close = async () => {
      providers[0]!.closes++;
      throw new Error('boom');
    };
    await m.close();
    expect(providers.map((p) => p.closes)).toEqual([1, 1]);
    expect(cap.messages('error')).toContain('Failed to close delegation token provider');
  });

  it('row 17: a cycle in flight when stop() is called neither notifies nor reschedules', async () => {
    const { clock, providers, receivers, m, cap } = await setup();
    const listener = new RecordingListener();
    await m.start(listener);
    const gate = deferred<void>();
    providers[1]!.obtain = async (n) => {
      await gate.promise;
      return { tokens: bytes(`b-${n}`), validUntil: clock.wallMs() + 100 * S };
    };
    m.reobtainDelegationTokens();
    await clock.advance(0);
    const stopped = m.stop(); // does not wait for the cycle
    await stopped;
    gate.resolve();
    await clock.advance(0);
    expect(listener.containers).toHaveLength(1);
    expect(receivers[1]!.received).toEqual(['b-1']);
    expect(clock.pending()).toEqual([]);
    expect(cap.messages('info')).toContain('Manager stopped while the tokens were being obtained, skipping notifications');
  });

  it('row 17: a session ending while receivers are being notified reaches neither its listener nor the next one', async () => {
    const { clock, receivers, m } = await setup(['a']);
    const first = new RecordingListener();
    await m.start(first);
    const gate = deferred<void>();
    receivers[0]!.onNew = (t) => (Buffer.from(t).toString() === 'a-2' ? gate.promise : undefined);
    m.reobtainDelegationTokens();
    await clock.advance(0); // cycle 2 waits in its receiver
    await m.stop();
    const second = new RecordingListener();
    const started = m.start(second);
    gate.resolve();
    await started;
    expect(first.containers).toEqual([{ a: 'a-1' }]);
    expect(second.containers).toEqual([{ a: 'a-3' }]);
    await m.close();
  });

  it('row 17: a stale cycle never delivers into the next session', async () => {
    const { clock, providers, m } = await setup(['a']);
    const first = new RecordingListener();
    await m.start(first);
    const gate = deferred<void>();
    providers[0]!.obtain = async (n) => {
      if (n === 2) await gate.promise;
      return { tokens: bytes(`a-${n}`) };
    };
    m.reobtainDelegationTokens();
    await clock.advance(0); // cycle 2 of session 1 waits in obtain
    await m.stop();
    const second = new RecordingListener();
    const started = m.start(second); // waits for the stale cycle, then runs its own
    gate.resolve();
    await started;
    expect(first.containers).toEqual([{ a: 'a-1' }]);
    expect(second.containers).toEqual([{ a: 'a-3' }]);
    await m.close();
  });

  it('row 18: a cycle queued behind a running one skips its obtain when the session ends', async () => {
    const { clock, providers, m } = await setup(['a']);
    await m.start();
    const gate = deferred<void>();
    providers[0]!.obtain = async (n) => {
      if (n === 2) await gate.promise;
      return { tokens: bytes(`a-${n}`) };
    };
    m.reobtainDelegationTokens();
    await clock.advance(0); // cycle 2 waits in obtain
    m.reobtainDelegationTokens();
    await clock.advance(0); // cycle 3 queued behind it
    await m.stop();
    gate.resolve();
    await clock.advance(0);
    expect(providers[0]!.obtains).toBe(2);
  });

  it('row 34: stop() unregisters every job of the session but keeps providers usable for the next start', async () => {
    const { m, providers } = await setup();
    await m.start();
    await m.registerJob('j1', {});
    await m.registerJob('j2', {});
    await m.stop();
    expect(m.status().registeredJobs).toEqual([]);
    expect(providers[0]!.unregistered.sort()).toEqual(['j1', 'j2']);
    expect(providers[0]!.closes).toBe(0);
    await m.start();
    expect(providers[0]!.obtains).toBe(2);
    await m.close();
  });

  it('row 35: close() does not wait for an in-flight obtain, and that obtain delivers nothing', async () => {
    const { clock, providers, receivers, m } = await setup(['a']);
    const listener = new RecordingListener();
    await m.start(listener);
    const gate = deferred<void>();
    providers[0]!.obtain = async (n) => {
      await gate.promise;
      return { tokens: bytes(`a-${n}`) };
    };
    m.reobtainDelegationTokens();
    await clock.advance(0);
    await m.close();
    expect(providers[0]!.closes).toBe(1);
    gate.resolve();
    await clock.advance(0);
    expect(listener.containers).toEqual([{ a: 'a-1' }]);
    expect(receivers[0]!.received).toEqual(['a-1']);
  });
});
