import type { DelegationTokenManagerCallback, DelegationTokenProvider, ProviderConfig } from '../../../../src/plugin-kit/token-spi';

/**
 * A ProviderConfig over flat keys, as the manager builds it: `get('x')` reads
 * `security.delegation.token.provider.<service>.x`.
 */
export function providerConfig(serviceName: string, settings: Record<string, string>): ProviderConfig {
  const prefix = `security.delegation.token.provider.${serviceName}.`;
  return {
    get: (relative) => settings[`${prefix}${relative}`],
    raw: (key) => settings[key],
  };
}

/**
 * A manager callback that records, at each call, whether the provider already reported tokens as
 * required — i.e. whether the job's state was recorded *before* the re-obtain was requested.
 */
export function recordingCallback(provider: () => DelegationTokenProvider): DelegationTokenManagerCallback & {
  calls: number;
  requiredAtCall: boolean[];
} {
  const cb = {
    calls: 0,
    requiredAtCall: [] as boolean[],
    reobtainDelegationTokens() {
      cb.calls += 1;
      cb.requiredAtCall.push(provider().delegationTokensRequired() as boolean);
    },
  };
  return cb;
}

/** The JSON payload of an obtain. */
export function decode<T>(tokens: Uint8Array): T {
  return JSON.parse(new TextDecoder().decode(tokens)) as T;
}

/** The message a promise (or a sync throw inside it) rejects with, or 'resolved'. */
export async function failure(fn: () => unknown): Promise<string> {
  try {
    await fn();
    return 'resolved';
  } catch (err) {
    return (err as Error).message;
  }
}
