import { GatewayError } from '../errors/gateway-error';
import type { TokenRegistrationFailure } from './token-spi';

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
  const err = new GatewayError('GW_TOKENS_REJECTED', { provider, reason: describeCause(cause) }, { cause }) as GatewayError &
    TokenRegistrationFailure;
  Object.defineProperty(err, 'provider', { value: provider, enumerable: true });
  return err;
}

/**
 * What a provider throws from `registerJob` to refuse a job deliberately (what it asks for is not
 * allowed, or cannot be served): the client gets 400 `GW_TOKENS_REJECTED` with `reason`. Anything
 * else a provider throws is an unexpected failure: 500 `GW_TOKENS_PROVIDER_FAILED`, and the provider
 * is marked unhealthy in `GET /gateway/v1/tokens`. Recognised by its `refusal` flag (not
 * `instanceof`), so a provider built against another copy of this module is understood too.
 */
export class JobRefusedError extends Error {
  readonly refusal = true as const;
  constructor(reason: string, options?: { cause?: unknown }) {
    super(reason, options);
    this.name = 'JobRefusedError';
  }
}

/** Whether a provider's error is a deliberate refusal (`JobRefusedError` or `{ refusal: true }`). */
export function isRefusal(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { refusal?: unknown }).refusal === true;
}

/** `GW_TOKENS_PROVIDER_FAILED` naming the provider; the cause (never shown to the client) stays attached for the log. */
export function providerFailed(provider: string, cause: unknown): GatewayError & { provider: string } {
  const err = new GatewayError('GW_TOKENS_PROVIDER_FAILED', { provider }, { cause }) as GatewayError & { provider: string };
  Object.defineProperty(err, 'provider', { value: provider, enumerable: true });
  return err;
}
