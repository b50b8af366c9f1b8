import pino, { type Logger } from 'pino';
import type { OptionsRegistry } from './config/registry';

const CENSOR = '[redacted]';

/**
 * The root logger. Redaction comes from two places: fixed paths for the headers and fields that
 * carry credentials, and the registry — a value logged under a key the registry declares
 * `sensitive` (`s3.secret-key`, `fs.azure.account.key.<account>.blob.core.windows.net`, ...) is
 * censored wherever it sits in a log line's object, so a configuration map logged by mistake
 * cannot leak a credential. Configuration values are not logged on purpose in the first place.
 */
export function createLogger(level: string, registry: OptionsRegistry, destination?: pino.DestinationStream): Logger {
  const sensitive = (key: string): boolean => registry.lookup(key)?.sensitive === true;
  return pino(
    {
      level,
      base: { name: 'flink-jar-gateway' },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'headers.authorization',
          'headers.cookie',
          'headers["x-amz-security-token"]',
          'headers["x-ms-authorization"]',
          '*.secret',
          '*.password',
          '*.token',
        ],
        censor: CENSOR,
      },
      formatters: { log: (obj) => censorSensitiveKeys(obj, sensitive, 0) as Record<string, unknown> },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

// Deep enough for `{ config: { key: value } }` and a level more; log objects are small and flat,
// and the bound keeps a cyclic or huge object from costing more than a few levels of walking.
const MAX_DEPTH = 4;

/** A copy of `value` whose sensitive keys are censored; the input (the caller's object) is left as it was. */
function censorSensitiveKeys(value: unknown, sensitive: (key: string) => boolean, depth: number): unknown {
  if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => censorSensitiveKeys(v, sensitive, depth + 1));
  // Errors, Buffers, Maps and the like go to pino's serializers unchanged.
  if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = sensitive(k) ? CENSOR : censorSensitiveKeys(v, sensitive, depth + 1);
  return out;
}
