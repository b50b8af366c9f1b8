import type { IncomingMessage as Request } from 'node:http';
import { GatewayError } from '../errors/gateway-error';

/**
 * Reads a JSON request body on a route the gateway owns (no global body parser runs before
 * routing). Like Flink, an empty body means `{}`; anything that is not a JSON object is refused
 * with Flink's wording.
 */
export async function readJsonObject(
  req: Request,
  limitBytes: number,
  typeName: string,
  budget?: JsonBudget,
): Promise<Record<string, unknown>> {
  const tooLarge = () => {
    const err = new GatewayError('GW_REQUEST_TOO_LARGE', { limit: limitBytes });
    err.headers = { connection: 'close' };
    return err;
  };
  // Refused before a byte is read when the client says up front that it is too large.
  if (Number(req.headers['content-length'] ?? 0) > limitBytes) throw tooLarge();
  const release = budget?.acquire();
  try {
    return parseObject((await readUpTo(req, limitBytes, tooLarge)).toString('utf8'), typeName);
  } finally {
    release?.();
  }
}

/**
 * The body, or `tooLarge()` once it passes `limit`. The request is left paused, not destroyed
 * (as a `for await` over it would): destroying it closes the connection before the answer is
 * written; the request context then drops the rest of it after the answer, bounded.
 */
function readUpTo(req: Request, limit: number, tooLarge: () => GatewayError): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (result: Error | Buffer) => {
      req.off('data', onData).off('end', onEnd).off('error', done).off('close', onClose);
      if (result instanceof Buffer) resolve(result);
      else reject(result);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      req.pause();
      done(tooLarge());
    };
    const onEnd = () => done(Buffer.concat(chunks));
    const onClose = () =>
      done(new GatewayError('GW_REQUEST_MALFORMED', { type: 'request body', reason: 'the client closed the connection' }));
    req.on('data', onData).on('end', onEnd).on('error', done).on('close', onClose);
  });
}

/**
 * How many JSON bodies may be held at once (each at most the limit): beyond that a request gets
 * 503 GW_GATEWAY_BUSY with Retry-After instead of another buffer, so concurrent large bodies cannot
 * grow memory without bound.
 */
export class JsonBudget {
  private held = 0;

  constructor(private readonly max: number) {}

  acquire(): () => void {
    if (this.held >= this.max) {
      const err = new GatewayError('GW_GATEWAY_BUSY', { what: 'request bodies', limit: 'gateway.http.max-json-body' });
      err.headers = { 'retry-after': '1', connection: 'close' };
      throw err;
    }
    this.held++;
    let released = false;
    return () => {
      if (!released) this.held--;
      released = true;
    };
  }
}

/** Flink's rule for a request body: empty means `{}`; anything else must be a JSON object. */
export function parseObject(text: string, typeName: string): Record<string, unknown> {
  if (text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new GatewayError('GW_REQUEST_MALFORMED', { type: typeName, reason: `the body is not valid JSON (${(err as Error).message})` });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new GatewayError('GW_REQUEST_MALFORMED', { type: typeName, reason: 'the body must be a JSON object' });
  }
  return parsed as Record<string, unknown>;
}
