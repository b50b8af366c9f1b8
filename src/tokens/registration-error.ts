import { GatewayError } from '../errors/gateway-error';
import type { TokenRegistrationFailure } from './spi';

const MAX_REASON = 500;

/** The provider's own words, on one line and bounded (it reaches the client's error message). */
export function describeCause(err: unknown): string {
  const text = err instanceof Error ? err.message || err.name : typeof err === 'string' ? err : String(err);
  const line = text.replace(/\s+/g, ' ').trim() || 'no reason given';
  return line.length > MAX_REASON ? `${line.slice(0, MAX_REASON)}…` : line;
}

/**
 * `GW_TOKENS_REJECTED` naming the provider and its reason. The provider's original error stays
 * attached as `cause` (the reference rethrows the original; the gateway needs its own error code at
 * the HTTP edge, so it wraps instead).
 */
export function tokensRejected(provider: string, cause: unknown): GatewayError & TokenRegistrationFailure {
  const err = new GatewayError('GW_TOKENS_REJECTED', { provider, reason: describeCause(cause) }, { cause }) as GatewayError & TokenRegistrationFailure;
  Object.defineProperty(err, 'provider', { value: provider, enumerable: true });
  return err;
}
