import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';
import { looksSensitive } from '../config/registry';
import type { Configuration } from '../config/registry';
import { isFlinkSensitiveKey } from '../tokens/job-configuration';

/** What Flink itself shows for a hidden value (`GlobalConfiguration.HIDDEN_CONTENT`). */
export const HIDDEN = '******';

/** Known secret values shorter than this are not searched for inside other values (too many false hits). */
const MIN_SECRET_VALUE = 8;

/**
 * Which configuration values a relayed answer must not show: the gateway's sensitivity rule on top
 * of Flink's own word list.
 */
export interface SecretRule {
  isSecretKey(key: string): boolean;
  /** Values the gateway knows to be secrets: an answer's value that contains one is hidden whatever its key. */
  readonly secretValues: readonly string[];
}

/**
 * Flink's word list plus the gateway's name heuristic (`looksSensitive`): the rule without a
 * configuration (an app composed without one, in tests).
 */
export const flinkSecretRule: SecretRule = {
  isSecretKey: (key) => isFlinkSensitiveKey(key) || looksSensitive(key),
  secretValues: [],
};

/**
 * The gateway's sensitivity rule for JobManager answers: a key is secret when Flink's word list
 * says so, or when the options registry does — its `sensitive` options, exact or a family such as
 * `fs.azure.sas.<container>.<account>.blob.core.windows.net`, and its name heuristic for keys it
 * does not declare. Keys are tried as written and lower-cased (Flink's list ignores case). The
 * known values are those of every such key in the cluster's Flink configuration
 * (`gateway.cluster.flink-conf`) and in the gateway's own.
 */
export function gatewaySecretRule(config: Configuration): SecretRule {
  const registry = config.registry;
  const isSecretKey = (key: string) => isFlinkSensitiveKey(key) || registry.isSensitive(key) || registry.isSensitive(key.toLowerCase());
  const values = new Set<string>();
  const add = (v: unknown) => {
    if (typeof v === 'string') {
      if (v.trim().length >= MIN_SECRET_VALUE) values.add(v.trim());
    } else if (Array.isArray(v)) {
      v.forEach(add);
    } else if (typeof v === 'object' && v !== null) {
      Object.values(v).forEach(add);
    }
  };
  for (const [key, value] of Object.entries(config.cluster)) if (isSecretKey(key)) add(value);
  for (const key of config.keys()) if (isSecretKey(key)) add(config.value(key));
  return { isSecretKey, secretValues: [...values].sort((a, b) => b.length - a.length) };
}

/** `-Dkey=value` in a JVM option or a value that holds JVM options (`env.java.opts.all`). */
const SYSTEM_PROPERTY = /(^|\s)-D([^\s=]+)=("[^"]*"|'[^']*'|\S*)/g;

/**
 * A configuration answer with its secrets replaced by Flink's `******`: the value of every
 * `{key, value}` entry whose key is secret (Flink's `ConfigurationInfo`), every scalar property
 * whose name is secret (a job's user configuration), every `-D` property with a secret name inside
 * a string (JVM options), and every string that contains a known secret value. The shape is kept,
 * so Flink's Web UI and clients read it as before. `hidden` counts what was replaced.
 */
export function filterConfigurationAnswer(body: unknown, rule: SecretRule): { body: unknown; hidden: number } {
  let hidden = 0;
  const hide = (): string => {
    hidden++;
    return HIDDEN;
  };
  const text = (s: string): string => {
    if (rule.secretValues.some((v) => s.includes(v))) return hide();
    return s.replace(SYSTEM_PROPERTY, (all, lead: string, key: string) => (rule.isSecretKey(key) ? `${lead}-D${key}=${hide()}` : all));
  };
  const walk = (node: unknown): unknown => {
    if (typeof node === 'string') return text(node);
    if (Array.isArray(node)) return node.map(walk);
    if (typeof node !== 'object' || node === null) return node;
    const entry = node as Record<string, unknown>;
    const secretEntry = typeof entry.key === 'string' && 'value' in entry && rule.isSecretKey(entry.key);
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(entry)) {
      const scalar = value !== null && typeof value !== 'object';
      if (secretEntry && name === 'value') out[name] = hide();
      else if (scalar && name !== 'key' && rule.isSecretKey(name)) out[name] = hide();
      else out[name] = walk(value);
    }
    return out;
  };
  const filtered = walk(body);
  return { body: filtered, hidden };
}

/**
 * The bytes of an answer as sent, decoded from its `Content-Encoding` (gzip, deflate, br, in the
 * order applied). The gateway asks for `identity` on the routes it filters, and Flink's REST server
 * does not compress, but a proxy in between may: decoded rather than trusted. Bounded by `maxBytes`
 * decoded; an unknown coding throws.
 */
export function decodeAnswer(bytes: Buffer, contentEncoding: string | string[] | undefined, maxBytes: number): Buffer {
  const codings = (Array.isArray(contentEncoding) ? contentEncoding.join(',') : (contentEncoding ?? ''))
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  let out = bytes;
  for (const coding of codings.reverse()) {
    const opts = { maxOutputLength: maxBytes };
    if (coding === 'gzip' || coding === 'x-gzip') out = gunzipSync(out, opts);
    else if (coding === 'br') out = brotliDecompressSync(out, opts);
    else if (coding === 'deflate') {
      // "deflate" is zlib-wrapped by the RFC, raw in some servers' hands.
      try {
        out = inflateSync(out, opts);
      } catch {
        out = inflateRawSync(out, opts);
      }
    } else throw new Error(`an answer in the unknown content coding '${coding.slice(0, 40)}'`);
  }
  return out;
}
