import type { IncomingMessage as Request } from 'node:http';
import { GatewayError } from '../errors/gateway-error';

/**
 * Reads a JSON request body on a route the gateway owns (no global body parser runs before
 * routing). Like Flink, an empty body means `{}`; anything that is not a JSON object is refused
 * with Flink's wording.
 */
export async function readJsonObject(req: Request, limitBytes: number, typeName: string): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) {
      const err = new GatewayError('GW_REQUEST_TOO_LARGE', { limit: limitBytes });
      err.headers = { connection: 'close' };
      throw err;
    }
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
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
