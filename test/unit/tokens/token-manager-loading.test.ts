import { ConfigError } from '../../../src/config/registry';
import { NoopTokenManager } from '../../../src/tokens/noop-token-manager';
import { createTokenManager, DefaultTokenManager } from '../../../src/tokens/token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import { captureLogger, FakeProvider, FakeReceiver, pairs, tokenConfig } from '../../helpers/token-fakes';

/** docs/tokens.md edge cases 1–6: what start-up accepts and refuses. */
describe('token manager start-up (loading providers and receivers)', () => {
  const create = (providers: FakeProvider[], receivers: FakeReceiver[], options: Record<string, string> = {}) => {
    const cap = captureLogger();
    const promise = DefaultTokenManager.create({
      config: tokenConfig(options),
      providers,
      receivers,
      log: cap.log,
      clock: new ManualClock(),
    });
    return { promise, cap };
  };

  it('row 1: refuses duplicate provider names before initialising either of them', async () => {
    const a1 = new FakeProvider('a');
    const a2 = new FakeProvider('a');
    await expect(create([a1, a2], [new FakeReceiver('a')]).promise).rejects.toMatchObject({
      code: 'GW_TOKENS_STARTUP',
      message: expect.stringMatching(/provider with service name a has multiple implementations/),
    });
    expect([a1.inits, a2.inits]).toEqual([0, 0]);
  });

  it('row 1: refuses duplicate receiver names too', async () => {
    const { providers } = pairs('a');
    await expect(create(providers, [new FakeReceiver('a'), new FakeReceiver('a')]).promise).rejects.toThrow(
      /receiver with service name a has multiple implementations/,
    );
    expect(providers[0]!.inits).toBe(0);
  });

  it('row 2: a provider whose init fails stops start-up, and the providers already initialised are closed', async () => {
    const { providers, receivers } = pairs('a', 'b', 'c');
    providers[1]!.initImpl = () => {
      throw new Error('no credentials configured');
    };
    const { promise, cap } = create(providers, receivers);
    await expect(promise).rejects.toThrow(/provider 'b' failed to initialise: no credentials configured/);
    expect(providers.map((p) => p.inits)).toEqual([1, 1, 0]);
    expect(providers.map((p) => p.closes)).toEqual([1, 0, 0]);
    expect(cap.messages('error')).toContain('Failed to initialize delegation token provider');
  });

  it('row 2: a receiver whose init fails stops start-up', async () => {
    const { providers, receivers } = pairs('a');
    receivers[0]!.initImpl = () => {
      throw new TypeError('cannot load');
    };
    await expect(create(providers, receivers).promise).rejects.toThrow(/receiver 'a' failed to initialise: cannot load/);
    expect(providers[0]!.closes).toBe(1);
  });

  it('row 3: a disabled provider is skipped, and the same key disables its receiver', async () => {
    const { providers, receivers } = pairs('a', 'b');
    const { promise, cap } = create(providers, receivers, { 'security.delegation.token.provider.b.enabled': 'false' });
    const m = await promise;
    expect(m.status().providers.map((p) => p.serviceName)).toEqual(['a']);
    expect([providers[1]!.inits, receivers[1]!.inits]).toEqual([0, 0]);
    expect(cap.messages('info')).toContain('Delegation token provider is disabled so not loaded');
    // A disabled provider without its receiver is fine: the name sets are compared after the switch.
    await expect(
      create([new FakeProvider('a'), new FakeProvider('x')], [new FakeReceiver('a')], {
        'security.delegation.token.provider.x.enabled': 'false',
      }).promise,
    ).resolves.toBeDefined();
  });

  it('row 3: a bad enabled value fails start-up like any other option', () => {
    expect(() => tokenConfig({ 'security.delegation.token.provider.b.enabled': 'yes' })).toThrow(ConfigError);
    expect(() => tokenConfig({ 'security.delegation.tokens.renewal.time-ratio': 'three quarters' })).toThrow(/not a number/);
    expect(
      tokenConfig({ 'security.delegation.tokens.renewal.time-ratio': '0.5' }).value('security.delegation.tokens.renewal.time-ratio'),
    ).toBe(0.5);
  });

  it('row 4: with security.delegation.tokens.enabled false, the manager is a no-op and loads nothing', async () => {
    const { providers, receivers } = pairs('a');
    const cap = captureLogger();
    const m = await createTokenManager({
      config: tokenConfig({ 'security.delegation.tokens.enabled': 'false' }),
      providers,
      receivers,
      log: cap.log,
    });
    expect(m).toBeInstanceOf(NoopTokenManager);
    await m.start();
    await m.registerJob('j1', { a: 'b' });
    m.reobtainDelegationTokens();
    await m.unregisterJob('j1');
    await m.close();
    expect(m.status()).toEqual({ enabled: false, providers: [], registeredJobs: [] });
    expect([providers[0]!.inits, receivers[0]!.inits, providers[0]!.registered.length]).toEqual([0, 0, 0]);
  });

  it('row 5: providers and receivers must have the same name sets, not just the same counts', async () => {
    await expect(
      create([new FakeProvider('a'), new FakeProvider('b')], [new FakeReceiver('a'), new FakeReceiver('c')]).promise,
    ).rejects.toThrow(/Missing receivers: b\. Missing providers: c/);
    await expect(create([new FakeProvider('a')], []).promise).rejects.toThrow(/Missing receivers: a/);
    await expect(create([], [new FakeReceiver('z')]).promise).rejects.toThrow(/Missing providers: z/);
  });

  it('row 6: providers sharing a name prefix only warn', async () => {
    const { providers, receivers } = pairs('s3-hadoop', 's3-presto');
    const { promise, cap } = create(providers, receivers);
    await promise;
    expect(cap.messages('warn').join('\n')).toMatch(/Multiple providers loaded with the same prefix: s3/);
  });

  it('gives each provider its own view of the configuration, defaults included', async () => {
    const { providers, receivers } = pairs('oauth2');
    const client = {
      'security.delegation.token.provider.oauth2.client-id': 'gw',
      'security.delegation.token.provider.oauth2.client-secret': 'shh',
    };
    await create(providers, receivers, {
      'security.delegation.token.provider.oauth2.token-endpoint': 'https://idp/token',
      ...client,
      's3.endpoint': 'http://s3',
    }).promise;
    const cfg = providers[0]!.config!;
    expect(cfg.get('token-endpoint')).toBe('https://idp/token');
    expect(cfg.get('enabled')).toBe('true');
    expect(cfg.get('missing')).toBeUndefined();
    expect(cfg.raw('s3.endpoint')).toBe('http://s3');
    expect(cfg.raw('security.delegation.tokens.reobtain.cooldown')).toBe('30 s');
  });

  it('refuses a service name that is empty or contains spaces', async () => {
    await expect(create([new FakeProvider(' ')], [new FakeReceiver(' ')]).promise).rejects.toThrow(/invalid service name/);
  });
});
