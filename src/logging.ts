import pino, { type Logger } from 'pino';
import type { OptionsRegistry } from './config/registry';

/**
 * The root logger. Redaction covers headers that carry credentials; configuration values are
 * never logged in the first place (only keys), and sensitive keys are known to the registry.
 */
export function createLogger(level: string, _registry: OptionsRegistry, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { name: 'flink-jar-gateway' },
      redact: {
        paths: [
          'req.headers.authorization', 'req.headers.cookie', 'headers.authorization', 'headers.cookie',
          'headers["x-amz-security-token"]', 'headers["x-ms-authorization"]', '*.secret', '*.password', '*.token',
        ],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
