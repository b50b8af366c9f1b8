import { RetryBackoff, renewalDelay } from '../../../src/tokens/renewal-schedule';

/** docs/tokens.md edge cases 11 and 12: the arithmetic on its own. */
describe('renewal and retry arithmetic', () => {
  const S = 1000;
  const MIN = 60 * S;

  it('renews at ratio × remaining validity (calculateRenewalDelayShouldConsiderRenewalRatio)', () => {
    expect(renewalDelay(0.5, 200, 100)).toBe(50);
    expect(renewalDelay(0.75, 12 * 3600 * S, 0)).toBe(9 * 3600 * S);
    // Already expired: negative; the scheduler clamps it (tested on the manager).
    expect(renewalDelay(0.75, 100, 200)).toBe(-75);
  });

  it('doubles on consecutive failures up to the max backoff, with no jitter at random 0.5', () => {
    const b = new RetryBackoff({ initialMs: 10 * S, maxMs: 5 * MIN, random: () => 0.5 });
    expect([b.nextDelay(0), b.nextDelay(0), b.nextDelay(0)]).toEqual([10 * S, 20 * S, 40 * S]);
    expect(b.currentBase()).toBe(80 * S);
    const rest = [1, 2, 3, 4].map(() => b.nextDelay(0));
    expect(rest).toEqual([80 * S, 160 * S, 5 * MIN, 5 * MIN]);
  });

  it('jitters by ±50 %', () => {
    expect(new RetryBackoff({ initialMs: 10 * S, maxMs: 5 * MIN, random: () => 0 }).nextDelay(0)).toBe(5 * S);
    expect(new RetryBackoff({ initialMs: 10 * S, maxMs: 5 * MIN, random: () => 0.999 }).nextDelay(0)).toBe(14_990);
  });

  it('resets after a success and for a new session', () => {
    const b = new RetryBackoff({ initialMs: 10 * S, maxMs: 5 * MIN, random: () => 0.5 });
    b.nextDelay(0);
    b.nextDelay(0);
    b.succeeded(10 * 3600 * S);
    expect(b.nextDelay(0)).toBe(10 * S);
    b.nextDelay(0);
    b.reset();
    expect(b.nextDelay(0)).toBe(10 * S);
  });

  it('caps a retry at a third of the remaining validity of the last tokens (calculateRetryDelayShouldCapToTtlBound)', () => {
    const b = new RetryBackoff({ initialMs: 60 * S, maxMs: 5 * MIN, random: () => 0.999 });
    b.succeeded(30 * S); // 30 s left at wall time 0
    expect(b.nextDelay(0)).toBe(10 * S);
    // Later and closer to expiry, the cap shrinks with it.
    expect(b.nextDelay(27 * S)).toBe(1 * S);
  });

  it('falls back to the max backoff as the cap once the tokens have expired', () => {
    const b = new RetryBackoff({ initialMs: 10 * S, maxMs: 5 * MIN, random: () => 0.999 });
    b.succeeded(30 * S);
    expect(b.nextDelay(31 * S)).toBe(14_990);
  });
});
