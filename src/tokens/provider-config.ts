import type { Configuration } from '../config/registry';
import { formatValue } from '../config/types';
import type { ProviderConfig } from '../plugin-kit/token-spi';
import { PROVIDER_PREFIX, RECEIVER_PREFIX } from './token-options';

/**
 * A provider's (or receiver's) view of the gateway configuration, like Flink's
 * `DelegatingConfiguration`: `get('region')` reads `security.delegation.token.provider.<name>.region`.
 * Values are strings in Flink syntax; a declared option that is unset reads as its default.
 */
export function providerConfig(config: Configuration, serviceName: string, kind: 'provider' | 'receiver' = 'provider'): ProviderConfig {
  const prefix = `${kind === 'provider' ? PROVIDER_PREFIX : RECEIVER_PREFIX}.${serviceName}.`;
  const read = (key: string): string | undefined => {
    const def = config.registry.lookup(key);
    const value = config.value(key);
    if (def) return value === undefined ? (def.default === undefined ? undefined : formatValue(def, def.default)) : formatValue(def, value);
    return value === undefined ? undefined : String(value);
  };
  return {
    get: (relativeKey) => read(prefix + relativeKey),
    raw: (key) => read(key),
  };
}

/** `security.delegation.token.provider.<name>.enabled`, default true; the same key switches the receiver. */
export function isProviderEnabled(config: Configuration, serviceName: string): boolean {
  const value = config.value(`${PROVIDER_PREFIX}.${serviceName}.enabled`);
  if (value === undefined) return true;
  // Declared as a boolean template, so the registry has already parsed (and validated) it.
  return value === true || value === 'true';
}
