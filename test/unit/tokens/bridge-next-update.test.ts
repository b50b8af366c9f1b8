import { BridgeReceiverSet } from '../../../src/tokens/receivers/bridge-receivers';
import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { bridgeEndpoint } from '../../../src/http/token-bridge-route';
import type { BridgeSecret } from '../../../src/tokens/receivers/bridge-secret';
import { ManualClock } from '../../helpers/manual-clock';
import { bytes, captureLogger, deferred, FakeProvider, tokenConfig } from '../../helpers/token-fakes';

const S = 1000;

/**
 * The bridge answer's `nextUpdateAt`: when the gateway's tokens change next. Flink's token manager
 * re-obtains every provider of the JobManager whenever the bridge asks to be called, so the bridge
 * asks soon only while this is near (token-bridge's FlinkManagerCyclesTest shows Flink's side).
 */
describe('token bridge: nextUpdateAt', () => {
  async function setup() {
    const clock = new ManualClock();
    const cap = captureLogger();
    const provider = new FakeProvider('a');
    const delivery = { receivers: new BridgeReceiverSet({ log: cap.log }), secret: { matches: () => true } as unknown as BridgeSecret };
    const m = await DefaultTokenManager.create({
      config: tokenConfig({ 'security.delegation.tokens.reobtain.cooldown': '30 s' }),
      providers: [provider],
      receivers: delivery.receivers.receiversFor(['a']),
      log: cap.log,
      clock,
      jobListener: delivery.receivers,
    });
    const endpoint = bridgeEndpoint(delivery, m)!;
    return { clock, provider, m, answer: () => endpoint.container() };
  }

  it('is null while nothing is scheduled, the renewal time once tokens have one, now while a cycle runs, the cooldown end for a deferred re-obtain', async () => {
    const { clock, provider, m, answer } = await setup();
    expect(answer().nextUpdateAt).toBeNull();

    provider.obtain = (n) => ({ tokens: bytes(`a-${n}`), validUntil: clock.wallMs() + 3600 * S });
    await m.start();
    // Renewal at 0.75 of the hour.
    expect(answer().nextUpdateAt).toBe(clock.wallMs() + 2700 * S);

    // A job's re-obtain right after the first cycle waits for the cooldown: the bridge is told when.
    m.reobtainDelegationTokens();
    await clock.advance(0);
    await clock.advance(10 * S);
    m.reobtainDelegationTokens();
    expect(answer().nextUpdateAt).toBe(clock.wallMs() + 20 * S);

    const gate = deferred<void>();
    provider.obtain = async (n) => {
      await gate.promise;
      return { tokens: bytes(`a-${n}`), validUntil: clock.wallMs() + 3600 * S };
    };
    await clock.advance(20 * S); // the deferred cycle starts and waits in its obtain
    expect(answer().nextUpdateAt).toBe(clock.wallMs());
    gate.resolve();
    await clock.advance(0);
    expect(answer().nextUpdateAt).toBe(clock.wallMs() + 2700 * S);
    await m.close();
  });
});
