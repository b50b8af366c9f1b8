import { OptionsRegistry } from '../../src/config/registry';
import type { BuiltInTokenProvider } from '../../src/plugin-kit/provider-support';
import type { DelegationTokenProvider, JobConfiguration } from '../../src/plugin-kit/token-spi';
import { isRefusal } from '../../src/plugin-kit/registration-error';
import { decode, failure, providerConfig, recordingCallback } from '../unit/tokens/providers/provider-kit';

/** What `fn` throws (undefined when it does not). */
async function thrown(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
    return undefined;
  } catch (err) {
    return err;
  }
}

/**
 * What every built-in delegation-token provider must do (the SPI rules of docs/tokens.md), run
 * against each one's real server: s3 on moto's STS, azure-blob on Azurite, oauth2 on a node:http
 * token endpoint. A provider's test file calls `tokenProviderContract` with a fixture, as
 * `fsPluginContract` does for fs-plugins.
 */
export interface TokenProviderFixture {
  /** Options that activate the provider against the test server (flat keys). */
  settings: Record<string, string>;
  /** A job configuration asking for something the settings allow. */
  allowed: JobConfiguration;
  /** A job configuration asking for something the settings do not allow. */
  refused: JobConfiguration;
  /** Strings that must never appear in a message (the provider's credentials). */
  secrets: string[];
  close(): Promise<void>;
}

const JOB = 'c0ffee00c0ffee00c0ffee00c0ffee00';

export function tokenProviderContract(definition: BuiltInTokenProvider, setup: () => Promise<TokenProviderFixture>): void {
  const name = definition.serviceName;
  describe(`token-provider contract: ${name}`, () => {
    let fx: TokenProviderFixture;
    beforeAll(async () => {
      fx = await setup();
    }, 120_000);
    afterAll(async () => fx?.close());

    const configured = (): DelegationTokenProvider => {
      const p = definition.create();
      p.init(providerConfig(name, fx.settings), { reobtainDelegationTokens: () => {} });
      return p;
    };
    const noSecret = (text: string) => {
      for (const s of fx.secrets) expect(text).not.toContain(s);
    };

    it('declares its service name and the job keys it reads (jobRequestKeys), each one it is asked through', () => {
      const p = definition.create();
      expect(p.serviceName).toBe(name);
      expect(p.jobRequestKeys?.length).toBeGreaterThan(0);
      // The keys a job uses to ask are declared, so they survive the removal of secrets from the job configuration.
      for (const key of [...Object.keys(fx.allowed), ...Object.keys(fx.refused)]) expect(p.jobRequestKeys).toContain(key);
      // Its options live under its own prefix.
      for (const o of definition.options) expect(o.key.startsWith(`security.delegation.token.provider.${name}.`)).toBe(true);
    });

    it('is inactive when unconfigured, and refuses a job that asks it for something, naming what to set', async () => {
      const p = definition.create();
      p.init(providerConfig(name, {}), { reobtainDelegationTokens: () => {} });
      expect(p.delegationTokensRequired()).toBe(false);
      const message = await failure(() => p.registerJob!(JOB, fx.allowed, { principal: 'token:ci' }));
      expect(message).toContain(`security.delegation.token.provider.${name}.`);
      // A deliberate refusal (400), not a failure of the provider (500, unhealthy).
      expect(isRefusal(await thrown(() => p.registerJob!(JOB, fx.allowed, { principal: 'token:ci' })))).toBe(true);
      p.close!();
    });

    it('registerJob is idempotent: the same request twice asks for one early cycle', () => {
      let p!: DelegationTokenProvider;
      const cb = recordingCallback(() => p);
      p = definition.create();
      p.init(providerConfig(name, fx.settings), cb);
      p.registerJob!(JOB, fx.allowed, { principal: 'token:ci' });
      p.registerJob!(JOB, fx.allowed, { principal: 'token:ci' });
      expect(cb.calls).toBe(1);
      // State recorded before the re-obtain was requested (SPI ordering rule).
      expect(cb.requiredAtCall).toEqual([true]);
      expect(p.delegationTokensRequired()).toBe(true);
      p.close!();
    });

    it('unregisterJob is idempotent, also for a job it never saw', () => {
      const p = configured();
      p.registerJob!(JOB, fx.allowed, { principal: 'token:ci' });
      p.unregisterJob!(JOB);
      expect(() => p.unregisterJob!(JOB)).not.toThrow();
      expect(() => p.unregisterJob!('ffffffffffffffffffffffffffffffff')).not.toThrow();
      expect(p.delegationTokensRequired()).toBe(false);
      p.close!();
    });

    it('refuses a job asking for something not allowed, with no secret in the message', async () => {
      const p = configured();
      const message = await failure(() => p.registerJob!(JOB, fx.refused, { principal: 'token:ci' }));
      expect(message).not.toBe('resolved');
      expect(isRefusal(await thrown(() => p.registerJob!(JOB, fx.refused, { principal: 'token:ci' })))).toBe(true);
      noSecret(message);
      expect(p.delegationTokensRequired()).toBe(false);
      p.close!();
    });

    it('obtains a payload for a registered job from the real server, with no secret in it', async () => {
      const p = configured();
      p.registerJob!(JOB, fx.allowed, { principal: 'token:ci' });
      const obtained = await p.obtainDelegationTokens();
      const payload = decode<{ version: number; jobs: Record<string, unknown> }>(obtained.tokens);
      expect(payload.version).toBe(1);
      expect(Object.keys(payload.jobs)).toContain(JOB);
      noSecret(new TextDecoder().decode(obtained.tokens));
      if (obtained.validUntil !== undefined) expect(obtained.validUntil).toBeGreaterThan(Date.now());
      p.close!();
    }, 60_000);

    it('obtain and registerJob after close fail; close is idempotent', async () => {
      const p = configured();
      p.close!();
      expect(() => p.close!()).not.toThrow();
      expect(await failure(() => p.obtainDelegationTokens())).toMatch(/closed/);
      expect(await failure(() => p.registerJob!(JOB, fx.allowed, { principal: 'token:ci' }))).toMatch(/closed/);
    });

    it('refuses half its credentials at resolve time (its rules), not silently inactive', () => {
      const [firstKey, firstValue] = Object.entries(fx.settings)[0]!;
      const half = new Map([[firstKey, { value: firstValue, source: 'test' }]]);
      let err: unknown;
      try {
        new OptionsRegistry(definition.options, definition.rules, []).resolve(half);
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ code: 'GW_CONFIG_INVALID' });
      expect((err as Error).message).toContain('must be set together with');
      noSecret((err as Error).message);
    });
  });
}
