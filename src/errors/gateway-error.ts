import { ERROR_CODES, type ErrorCode } from './codes';

export type ErrorParams = Record<string, string | number>;

/**
 * The only error type the HTTP layer maps to a response. Callers match on `code`, never on
 * `instanceof` (module sandboxes in tests can load two copies of this class).
 */
export class GatewayError extends Error {
  readonly status: number;
  /** Extra response headers, e.g. `Connection: close` after an aborted upload. */
  headers?: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    readonly params: ErrorParams = {},
    options?: { cause?: unknown },
  ) {
    super(render(code, params), options);
    this.name = 'GatewayError';
    this.status = ERROR_CODES[code].status;
  }
}

export function render(code: ErrorCode, params: ErrorParams): string {
  return ERROR_CODES[code].template.replace(/\{(\w+)\}/g, (_, name: string) =>
    params[name] !== undefined ? String(params[name]) : `{${name}}`,
  );
}

/**
 * The message as the gateway's log may hold it: without what the JobManager said (a job's main()
 * writes it, and may put anything there) and without query strings, fragments or userinfo of the
 * URIs and paths a client sent (signed URLs carry credentials there). The client still gets `message`.
 */
export function logSafeMessage(err: GatewayError): string {
  const safe: ErrorParams = {};
  for (const [name, value] of Object.entries(err.params)) {
    if (name === 'flinkMessage') safe[name] = `<the JobManager's message, ${String(value).length} characters, not logged>`;
    else if (typeof value === 'string' && URI_PARAMS.has(name)) safe[name] = withoutSecrets(value);
    else safe[name] = value;
  }
  return render(err.code, safe);
}

const URI_PARAMS = new Set(['uri', 'path', 'route', 'target', 'location']);

function withoutSecrets(text: string): string {
  return text.replace(/[?#].*$/s, '').replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, '$1');
}

export function isGatewayError(err: unknown): err is GatewayError {
  return (
    typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string' &&
    (err as { code: string }).code in ERROR_CODES && typeof (err as { status?: unknown }).status === 'number'
  );
}

/** Flink's error envelope: exactly one key, `errors`, so Flink's Java client recognises it. */
export function errorBody(err: GatewayError): { errors: string[] } {
  // Messages may quote client input (a JSON parser's complaint about it, say); lone surrogates in it
  // would make the body invalid JSON (RFC 8259), so they become U+FFFD here, for every code.
  return { errors: [`${err.code}: ${err.message}`.toWellFormed()] };
}
