import { type GatewayError, isGatewayError } from '../errors/gateway-error';

/** Deep enough for SDK → undici → socket wrappers; the bound keeps a cyclic chain finite. */
const MAX_DEPTH = 8;

/**
 * `err`, its `cause` chain and the `errors` of any AggregateError on the way (happy-eyeballs
 * connects fail with one per address), depth first, each at most once.
 */
export function* errorChain(err: unknown, depth = 0, seen = new Set<object>()): Generator<object> {
  if (depth > MAX_DEPTH || err === null || typeof err !== 'object' || seen.has(err)) return;
  seen.add(err);
  yield err;
  const nested = (err as { errors?: unknown }).errors;
  if (Array.isArray(nested)) for (const e of nested) yield* errorChain(e, depth + 1, seen);
  yield* errorChain((err as { cause?: unknown }).cause, depth + 1, seen);
}

/** A gateway error anywhere in the chain: the SSRF guard's refusal, raised inside a socket, must surface unchanged. */
export function findGatewayError(err: unknown): GatewayError | undefined {
  for (const e of errorChain(err)) if (isGatewayError(e)) return e;
  return undefined;
}

/** Codes undici wraps the socket's own error in: less telling than what they wrap. */
const GENERIC_CODES = new Set(['UND_ERR_SOCKET', 'UND_ERR_CONNECT', 'UND_ERR']);

/** The most specific string `code` in the chain (`ECONNREFUSED` rather than undici's `UND_ERR_SOCKET`). */
export function specificErrorCode(err: unknown): string | undefined {
  let generic: string | undefined;
  for (const e of errorChain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== 'string') continue;
    if (!GENERIC_CODES.has(code)) return code;
    generic ??= code;
  }
  return generic;
}
