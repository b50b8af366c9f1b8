import type { OptionsRegistry } from '../config/registry';
import { looksSensitive } from '../config/registry';

/**
 * What Flink itself hides (`GlobalConfiguration.SENSITIVE_KEYS`, Flink 2.1–2.3): a key is
 * sensitive when its lower-cased name contains one of these.
 */
export const FLINK_SENSITIVE_KEY_PARTS: readonly string[] = [
  'password',
  'secret',
  'fs.azure.account.key',
  'apikey',
  'api-key',
  'auth-params',
  'service-key',
  'token',
  'basic-auth',
  'jaas.config',
  'http-headers',
];

/** Flink's `GlobalConfiguration.isSensitive`. */
export function isFlinkSensitiveKey(key: string): boolean {
  const k = key.toLowerCase();
  return FLINK_SENSITIVE_KEY_PARTS.some((part) => k.includes(part));
}

/**
 * Which keys of a job's effective configuration are secrets, i.e. never shown to a token provider
 * nor written to the registration store:
 * - a declared option: exactly when it is declared sensitive (whatever a provider declares);
 * - a key a provider declares as one of its job-request keys: never (its value is a scope, such as
 *   a role ARN or container list, which the provider must see to decide);
 * - any other key: Flink's own sensitive-key rule, and the gateway's name heuristic on top of it
 *   (credential, private-key, sas, authorization, ...) — hiding one key too many costs nothing here.
 */
export function jobSecretRule(registry: OptionsRegistry, jobRequestKeys: readonly string[]): (key: string) => boolean {
  // Exact keys only: a prefix would let one careless declaration reveal a whole family of secrets.
  const declared = new Set(jobRequestKeys);
  return (key) => {
    const def = registry.lookup(key) ?? registry.deprecatedOf(key);
    if (def) return def.sensitive === true;
    if (declared.has(key)) return false;
    return isFlinkSensitiveKey(key) || looksSensitive(key);
  };
}
