import type { Logger } from 'pino';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';
import type { TokenManager } from '../plugin-kit/token-spi';
import { BridgeUrlFile, createTokenDelivery, receiversFor, type TokenDelivery, type TokenServices } from './token-delivery';
import { createTokenManager } from './token-manager';

export interface TokensFeature {
  tokens: TokenManager;
  delivery: TokenDelivery | undefined;
  /** The `tokens` child logger the token framework (and its stores) log with. */
  log: Logger;
  /**
   * What a cluster the gateway launches needs from the token delivery: the bridge's keys, and
   * whether its jar goes on the class path (only when the gateway launches the cluster and serves the bridge).
   */
  launch: { flinkConfig: Record<string, string>; withTokenBridge: boolean };
  /** Where a launched cluster's bridge finds the gateway, written once the gateway listens. */
  bridgeUrl: BridgeUrlFile | undefined;
}

/**
 * The token framework: the delivery (bridge secret, file receiver), the manager with its providers
 * and receivers, and — for a cluster the gateway launches — the URL file its token bridge reads.
 * A provider that fails to initialise stops start-up here, before anything else starts.
 */
export async function createTokens(o: {
  config: Configuration;
  logger: Logger;
  services: TokenServices;
  storeDir: string;
  resources: AsyncDisposableStack;
}): Promise<TokensFeature> {
  const { config, resources } = o;
  const log = o.logger.child({ component: 'tokens' });
  const delivery = await createTokenDelivery(config, log, o.storeDir);
  resources.defer(async () => delivery?.file?.flush());
  const providers = o.services.providers ?? [];
  const receivers = receiversFor(o.services, delivery);
  const tokens = resources.adopt(
    await createTokenManager({ config, providers, receivers, log, ...(delivery ? { jobListener: delivery.receivers } : {}) }),
    (t) => t.close(),
  );
  const launching = config.getOptional(coreOptions.clusterRestUrl) === undefined;
  const secret = launching ? delivery?.secret : undefined;
  const bridgeUrl = secret ? resources.adopt(new BridgeUrlFile(log), (f) => f.remove()) : undefined;
  const launch =
    bridgeUrl && secret
      ? { flinkConfig: bridgeUrl.flinkConfig(config, secret), withTokenBridge: true }
      : { flinkConfig: {}, withTokenBridge: false };
  return { tokens, delivery, log, launch, bridgeUrl };
}
