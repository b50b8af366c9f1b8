import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from './registry';

/**
 * Reads a YAML configuration file and flattens it the way Flink 2's config.yaml reads (both
 * `a.b: 1` and `a: {b: 1}` mean `a.b`). `keepWhole` names the keys whose YAML mapping stays one
 * object value instead (a map option written as a mapping). Failures name `optionKey` and the file.
 */
export function readFlatYaml(path: string, optionKey: string, keepWhole: (key: string) => boolean = () => false): Map<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError([{ key: optionKey, source: path, message: `cannot read the file: ${(err as Error).message}` }]);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new ConfigError([{ key: optionKey, source: path, message: `not valid YAML: ${(err as Error).message}` }]);
  }
  const out = new Map<string, unknown>();
  flatten(doc, '', out, keepWhole);
  return out;
}

function flatten(value: unknown, prefix: string, out: Map<string, unknown>, keepWhole: (key: string) => boolean): void {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && (prefix === '' || !keepWhole(prefix))) {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) flatten(v, prefix ? `${prefix}.${k}` : k, out, keepWhole);
  } else if (prefix !== '') {
    out.set(prefix, value);
  }
}
