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
  /**
   * What the JobManager said, verbatim (its `errors` strings), when this error translates one of
   * its answers: sent after the gateway's own message in the same `errors` array, so clients that
   * match Flink's wording (the operator's `status.error`, its exception-label mappers) still see it.
   */
  upstream?: string[];

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
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'string' &&
    (err as { code: string }).code in ERROR_CODES &&
    typeof (err as { status?: unknown }).status === 'number'
  );
}

/** Bound on the JobManager's own text kept in one answer (Flink's is a stack trace, usually a few kB). */
const MAX_UPSTREAM_CHARS = 256 * 1024;

/**
 * Flink's error envelope: exactly one key, `errors`, so Flink's Java client recognises it. The
 * gateway's message comes first (`GW_…: …`); the JobManager's own strings, when the error
 * translates its answer, follow verbatim.
 */
export function errorBody(err: GatewayError): { errors: string[] } {
  // Messages may quote client input (a JSON parser's complaint about it, say); lone surrogates in it
  // would make the body invalid JSON (RFC 8259), so they become U+FFFD here, for every code.
  const errors = [`${err.code}: ${err.message}`.toWellFormed()];
  let room = MAX_UPSTREAM_CHARS;
  for (const text of err.upstream ?? []) {
    if (room <= 0) break;
    errors.push((text.length > room ? `${text.slice(0, room)}…` : text).toWellFormed());
    room -= text.length;
  }
  return { errors };
}
