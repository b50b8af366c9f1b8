import type { TokenManager, TokenStatus } from '../plugin-kit/token-spi';

/**
 * The manager when `security.delegation.tokens.enabled: false` (Flink's NoOpDelegationTokenManager):
 * no provider or receiver is loaded and every operation does nothing.
 */
export class NoopTokenManager implements TokenManager {
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async close(): Promise<void> {}
  reobtainDelegationTokens(): void {}
  async registerJob(): Promise<void> {}
  async unregisterJob(): Promise<void> {}
  jobRequestKeys(): readonly string[] {
    return [];
  }
  nextUpdateAt(): number | undefined {
    return undefined;
  }
  status(): TokenStatus {
    return { enabled: false, providers: [], registeredJobs: [] };
  }
}
