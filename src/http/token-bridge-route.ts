import type { NextFunction, Request, Response } from 'express';
import { GatewayError } from '../errors/gateway-error';
import type { TokenContainer, TokenManager } from '../plugin-kit/token-spi';
import type { TokenDelivery } from '../tokens/token-delivery';
import { isLoopbackAddress } from '../net/loopback';

/** What the bridge endpoint serves. */
export interface TokenBridgeContainer extends TokenContainer {
  /** Epoch ms: the earliest expiry of the tokens in the container, when any provider gave one. */
  validUntil?: number;
  /**
   * Epoch ms when the gateway's tokens are expected to change next (`TokenManager.nextUpdateAt`),
   * null when nothing is scheduled: the bridge asks Flink to call it again just after that, or after
   * its idle interval, so the JobManager's other providers are not re-obtained every poll.
   */
  nextUpdateAt?: number | null;
}

export interface TokenBridgeDeps {
  /** Checks the bearer value against the bridge secret (constant time). */
  secret: { matches(presented: string): boolean };
  container(): TokenBridgeContainer;
}

/** The bridge endpoint: the delivery's container plus the earliest `validUntil` of its providers. */
export function bridgeEndpoint(delivery: TokenDelivery | undefined, tokens: TokenManager): TokenBridgeDeps | undefined {
  if (!delivery?.secret) return undefined;
  return {
    secret: delivery.secret,
    container: () => {
      const container = delivery.receivers.container();
      const expiries = tokens
        .status()
        .providers.filter((p) => p.validUntil !== undefined && p.serviceName in container.tokens)
        .map((p) => Date.parse(p.validUntil!));
      // Tells the bridge when to pull again: Flink's manager re-obtains every provider of the
      // JobManager whenever the bridge asks to be called, so it asks soon only while this is near.
      const nextUpdateAt = tokens.nextUpdateAt() ?? null;
      return { ...container, ...(expiries.length > 0 ? { validUntil: Math.min(...expiries) } : {}), nextUpdateAt };
    },
  };
}

/**
 * `GET /gateway/v1/tokens/bridge`: the latest token container (every provider's payload, entries of
 * jobs that are no longer registered left out) for the Flink-side token bridge. Only to loopback
 * peers (the TCP peer address, never a forwarded-for header) that present the bridge secret as a
 * bearer token; 403 / 401 in Flink's envelope otherwise. The body is a secret: it is never logged,
 * not cacheable and carries no CORS header.
 */
export function tokenBridgeHandler(deps: TokenBridgeDeps | undefined) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!deps) {
      next(new GatewayError('GW_ROUTE_NOT_FOUND', { uri: req.originalUrl.split('?')[0] ?? '' }));
      return;
    }
    const peer = req.socket.remoteAddress;
    if (!isLoopbackAddress(peer)) {
      next(new GatewayError('GW_TOKENS_BRIDGE_FORBIDDEN', { address: peer ?? 'an unknown address' }));
      return;
    }
    const header = req.headers.authorization;
    const m = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!m || !deps.secret.matches(m[1]!)) {
      const err = new GatewayError('GW_TOKENS_BRIDGE_UNAUTHORIZED');
      err.headers = { 'www-authenticate': 'Bearer realm="flink-jar-gateway-token-bridge"' };
      next(err);
      return;
    }
    const text = JSON.stringify(deps.container());
    res.writeHead(200, {
      'content-type': 'application/json; charset=UTF-8',
      'content-length': Buffer.byteLength(text),
      'cache-control': 'no-store',
    });
    res.end(text);
  };
}
