import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { OptionsRegistry, RawEntry } from './registry';
import { ConfigError } from './registry';
import { readSecretsDir, SECRETS_DIR_KEY } from './secrets-dir';

export interface CliArgs {
  configFile?: string;
  dynamic: Map<string, string>;
  help: boolean;
  printConfigDocs: boolean;
  printErrorDocs: boolean;
}

/** Parses Flink-CLI-style arguments: `-Dkey=value`, `-D key=value`, `--config <file>`, `--help`. */
export function parseArgs(argv: readonly string[]): CliArgs {
  const out: CliArgs = { dynamic: new Map(), help: false, printConfigDocs: false, printErrorDocs: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--help' || a === '-h') out.help = true;
    else if (a === '--print-config-docs') out.printConfigDocs = true;
    else if (a === '--print-error-docs') out.printErrorDocs = true;
    else if (a === '--config' || a === '-c') out.configFile = requireNext(argv, i++, a);
    else if (a.startsWith('--config=')) out.configFile = a.slice('--config='.length);
    else if (a === '-D') addDynamic(out, requireNext(argv, i++, a));
    else if (a.startsWith('-D')) addDynamic(out, a.slice(2));
    else throw new ConfigError([{ key: a, source: 'command line', message: 'unknown argument (use -Dkey=value, --config <file> or --help)' }]);
  }
  return out;
}

function requireNext(argv: readonly string[], i: number, flag: string): string {
  const v = argv[i + 1];
  if (v === undefined) throw new ConfigError([{ key: flag, source: 'command line', message: 'needs a value' }]);
  return v;
}

function addDynamic(out: CliArgs, kv: string): void {
  const i = kv.indexOf('=');
  if (i <= 0) throw new ConfigError([{ key: kv, source: 'command line', message: "expected -Dkey=value" }]);
  out.dynamic.set(kv.slice(0, i).trim(), kv.slice(i + 1));
}

/** `rest.port` → `FLINK_GATEWAY_REST_PORT`. */
export function envNameFor(key: string): string {
  return 'FLINK_GATEWAY_' + key.toUpperCase().replace(/[.\-<>]/g, '_');
}

/** Flattens nested YAML (Flink 2's config.yaml allows both `a.b: 1` and `a: {b: 1}`). */
function flatten(obj: unknown, prefix: string, out: Map<string, unknown>): void {
  if (obj !== null && typeof obj === 'object' && !Array.isArray(obj)) {
    for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
      const key = prefix ? `${prefix}.${k}` : k;
      // A map-typed option may legitimately be written as a YAML mapping; callers see the object.
      if (v !== null && typeof v === 'object' && !Array.isArray(v) && key.endsWith('headers')) out.set(key, v);
      else flatten(v, key, out);
    }
  } else {
    out.set(prefix, obj);
  }
}

export interface LoadResult {
  raw: Map<string, RawEntry>;
  /** Sensitive keys that were given with -D (visible in the process list): warn about them. */
  sensitiveOnCommandLine: string[];
}

/**
 * Merges the sources, lowest precedence first: defaults (implicit) → YAML → secret files
 * (`gateway.secrets.dir`) → env → -D.
 */
export function loadRaw(registry: OptionsRegistry, args: CliArgs, env: NodeJS.ProcessEnv): LoadResult {
  const raw = new Map<string, RawEntry>();
  // A deprecated key is stored under its option's key as it loads, so a later source overrides it
  // as usual; within one source the option's own key wins over a deprecated one.
  const level = new Map<string, { rank: number; deprecated: boolean }>();
  let rank = 0;
  const put = (key: string, entry: RawEntry): void => {
    const def = registry.deprecatedOf(key);
    const target = def?.key ?? key;
    const seen = level.get(target);
    if (def && seen?.rank === rank && !seen.deprecated) return;
    level.set(target, { rank, deprecated: def !== undefined });
    raw.set(target, def ? { ...entry, deprecatedKey: key } : entry);
  };
  const configFile = args.configFile ?? env.FLINK_GATEWAY_CONFIG_FILE;
  if (configFile) {
    let text: string;
    try {
      text = readFileSync(configFile, 'utf8');
    } catch (err) {
      throw new ConfigError([{ key: '--config', source: configFile, message: `cannot read the file: ${(err as Error).message}` }]);
    }
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (err) {
      throw new ConfigError([{ key: '--config', source: configFile, message: `not valid YAML: ${(err as Error).message}` }]);
    }
    const flat = new Map<string, unknown>();
    if (doc !== null && doc !== undefined) flatten(doc, '', flat);
    for (const [k, v] of flat) put(k, { value: v, source: configFile });
  }
  const secretsDir = args.dynamic.get(SECRETS_DIR_KEY) ?? env[envNameFor(SECRETS_DIR_KEY)] ?? (raw.get(SECRETS_DIR_KEY)?.value as string | undefined);
  rank++;
  if (secretsDir) for (const [k, v] of readSecretsDir(secretsDir)) put(k, v);
  rank++;
  const envKeys = [...registry.all().map((d) => d.key), ...registry.deprecatedKeys().map(([k]) => k)];
  for (const key of envKeys) {
    if (key.includes('<')) continue;
    const v = env[envNameFor(key)];
    if (v !== undefined) put(key, { value: v, source: `env ${envNameFor(key)}` });
  }
  rank++;
  const sensitiveOnCommandLine: string[] = [];
  for (const [k, v] of args.dynamic) {
    put(k, { value: v, source: '-D' });
    if (registry.isSensitive(k)) sensitiveOnCommandLine.push(k);
  }
  return { raw, sensitiveOnCommandLine };
}
