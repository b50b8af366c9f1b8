import { createTokenManager } from '../../../src/tokens/token-manager';
import { NoopTokenManager } from '../../../src/tokens/noop-token-manager';
import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { tokenOptions, tokensEnabled } from '../../../src/tokens/token-options';
import { ManualClock } from '../../helpers/manual-clock';
import { bytes, captureLogger, pairs, tokenConfig } from '../../helpers/token-fakes';

const S = 1000;

/**
 * Flink's own delegation-token keys, read as Flink reads them: a configuration Flink accepts (the
 * cluster's, through gateway.cluster.flink-conf, or a shared file) never stops the gateway.
 */
describe("Flink's delegation-token keys", () => {
  it("reads Flink 1.20–2.3's security.delegation.tokens.renewal.retry.backoff, and its older kerberos name, as the initial retry backoff", async () => {
    for (const key of ['security.delegation.tokens.renewal.retry.backoff', 'security.kerberos.tokens.renewal.retry.backoff']) {
      const config = tokenConfig({ [key]: '42 s' });
      expect(config.get(tokenOptions.retryInitialBackoff)).toBe(42_000);
      expect(config.notices).toEqual([
        expect.objectContaining({
          key,
          message: expect.stringMatching(/deprecated key; use security\.delegation\.tokens\.renewal\.retry\.initial\.backoff/),
        }),
      ]);
    }
    // The new key wins within one source.
    expect(
      tokenConfig({
        'security.delegation.tokens.renewal.retry.backoff': '42 s',
        'security.delegation.tokens.renewal.retry.initial.backoff': '3 s',
      }).get(tokenOptions.retryInitialBackoff),
    ).toBe(3000);

    // The manager retries a failed cycle after it (±50 % jitter; random 0.5 = none).
    const clock = new ManualClock();
    const { providers, receivers } = pairs('a');
    providers[0]!.obtain = () => {
      throw new Error('down');
    };
    const m = await DefaultTokenManager.create({
      config: tokenConfig({ 'security.delegation.tokens.renewal.retry.backoff': '42 s' }),
      providers,
      receivers,
      log: captureLogger().log,
      clock,
      random: () => 0.5,
    });
    await m.start();
    expect(clock.pending()).toEqual([42 * S]);
    await m.close();
  });

  it('accepts any renewal ratio Flink accepts and uses it within 0.01 … 1, with a warning', async () => {
    for (const [given, used] of [
      ['1.5', 1],
      ['0', 0.01],
      ['-2', 0.01],
    ] as const) {
      const clock = new ManualClock();
      const cap = captureLogger();
      const { providers, receivers } = pairs('a');
      providers[0]!.obtain = () => ({ tokens: bytes('a'), validUntil: clock.wallMs() + 100 * S });
      const m = await DefaultTokenManager.create({
        config: tokenConfig({ 'security.delegation.tokens.renewal.time-ratio': given }),
        providers,
        receivers,
        log: cap.log,
        clock,
      });
      await m.start();
      expect(clock.pending()).toEqual([Math.round(used * 100 * S)]);
      expect(cap.messages('warn').join('\n')).toMatch(/renewal ratio is outside 0\.01 … 1/);
      await m.close();
    }
    // Flink's older name for it.
    expect(tokenConfig({ 'security.kerberos.tokens.renewal.time-ratio': '0.5' }).get(tokenOptions.renewalRatio)).toBe(0.5);
  });

  it("gateway.tokens.enabled switches the gateway's framework; it defaults to Flink's security.delegation.tokens.enabled (and its older name)", async () => {
    expect(tokensEnabled(tokenConfig({}))).toBe(true);
    expect(tokensEnabled(tokenConfig({ 'security.delegation.tokens.enabled': 'false' }))).toBe(false);
    expect(tokensEnabled(tokenConfig({ 'security.kerberos.fetch.delegation-token': 'false' }))).toBe(false);
    // Flink's tokens off in the shared configuration, the gateway's on: its own switch wins.
    expect(tokensEnabled(tokenConfig({ 'security.delegation.tokens.enabled': 'false', 'gateway.tokens.enabled': 'true' }))).toBe(true);
    const { providers, receivers } = pairs('a');
    const on = await createTokenManager({
      config: tokenConfig({ 'security.delegation.tokens.enabled': 'false', 'gateway.tokens.enabled': 'true' }),
      providers,
      receivers,
      log: captureLogger().log,
    });
    expect(on).toBeInstanceOf(DefaultTokenManager);
    await on.close();
    const off = await createTokenManager({
      config: tokenConfig({ 'gateway.tokens.enabled': 'false' }),
      providers,
      receivers,
      log: captureLogger().log,
    });
    expect(off).toBeInstanceOf(NoopTokenManager);
  });
});
