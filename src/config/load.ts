import { parseArgs as nodeParseArgs } from 'node:util';
import type { OptionsRegistry, RawEntry } from './registry';
import { ConfigError } from './registry';
import { CLUSTER_FLINK_CONF_KEY, JOBMANAGER_OWN_KEYS, readClusterFlinkConfig } from './cluster-flink-config';
import { readSecretsDir, SECRETS_DIR_KEY } from './secrets-dir';
import { readFlatYaml } from './yaml-file';

export interface CliArgs {
  configFile?: string;
  dynamic: Map<string, string>;
  help: boolean;
  printConfigDocs: boolean;
  printErrorDocs: boolean;
}

/**
 * Parses Flink-CLI-style arguments with `node:util`'s parseArgs: `-Dkey=value`, `-D key=value`,
 * `--config <file>` (`-c`), `--help` (`-h`), `--print-config-docs`, `--print-error-docs`.
 */
export function parseArgs(argv: readonly string[]): CliArgs {
  let parsed: ReturnType<typeof parseCli>;
  try {
    parsed = parseCli(argv);
  } catch (err) {
    const e = err as { code?: string; message: string };
    const arg = /'([^']+)'/.exec(e.message)?.[1] ?? argv.join(' ');
    const message =
      e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' ? 'needs a value' : 'unknown argument (use -Dkey=value, --config <file> or --help)';
    throw new ConfigError([{ key: arg, source: 'command line', message }]);
  }
  const { values } = parsed;
  const out: CliArgs = {
    dynamic: new Map(),
    help: values.help === true,
    printConfigDocs: values['print-config-docs'] === true,
    printErrorDocs: values['print-error-docs'] === true,
  };
  if (values.config !== undefined) out.configFile = values.config.at(-1)!;
  for (const kv of values.D ?? []) addDynamic(out, kv);
  return out;
}

function parseCli(argv: readonly string[]) {
  return nodeParseArgs({
    args: [...argv],
    strict: true,
    allowPositionals: false,
    options: {
      D: { type: 'string', short: 'D', multiple: true },
      config: { type: 'string', short: 'c', multiple: true },
      help: { type: 'boolean', short: 'h' },
      'print-config-docs': { type: 'boolean' },
      'print-error-docs': { type: 'boolean' },
    },
  });
}

function addDynamic(out: CliArgs, kv: string): void {
  const i = kv.indexOf('=');
  if (i <= 0) throw new ConfigError([{ key: kv, source: 'command line', message: 'expected -Dkey=value' }]);
  out.dynamic.set(kv.slice(0, i).trim(), kv.slice(i + 1));
}

/** `rest.port` → `FLINK_GATEWAY_REST_PORT`. */
export function envNameFor(key: string): string {
  return 'FLINK_GATEWAY_' + key.toUpperCase().replace(/[.\-<>]/g, '_');
}

/** The gateway's own YAML file. A map-typed option may be written as a YAML mapping; it stays one value. */
function readGatewayYaml(configFile: string): Map<string, unknown> {
  return readFlatYaml(configFile, '--config', (key) => key.endsWith('headers'));
}

export interface LoadResult {
  raw: Map<string, RawEntry>;
  /** The cluster's own Flink configuration (`gateway.cluster.flink-conf`), as Flink reads it; empty without one. */
  cluster: Map<string, string>;
  /** Sensitive keys that were given with -D (visible in the process list): warn about them. */
  sensitiveOnCommandLine: string[];
}

/**
 * Merges the sources, lowest precedence first: defaults (implicit) → the cluster's Flink
 * configuration (`gateway.cluster.flink-conf`) → the gateway's YAML → secret files
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
  const own = configFile ? readGatewayYaml(configFile) : new Map<string, unknown>();
  // Where the two processes differ, the gateway keeps its own value (cluster-flink-config.ts).
  const clusterPath =
    args.dynamic.get(CLUSTER_FLINK_CONF_KEY) ??
    env[envNameFor(CLUSTER_FLINK_CONF_KEY)] ??
    (own.get(CLUSTER_FLINK_CONF_KEY) as string | undefined);
  const cluster = clusterPath ? readClusterFlinkConfig(clusterPath) : undefined;
  for (const [k, v] of cluster?.entries ?? []) {
    if (!JOBMANAGER_OWN_KEYS.has(k) && k !== CLUSTER_FLINK_CONF_KEY)
      put(k, { value: v, source: `cluster Flink configuration ${cluster!.path}` });
  }
  rank++;
  for (const [k, v] of own) put(k, { value: v, source: configFile! });
  const secretsDir =
    args.dynamic.get(SECRETS_DIR_KEY) ?? env[envNameFor(SECRETS_DIR_KEY)] ?? (raw.get(SECRETS_DIR_KEY)?.value as string | undefined);
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
  return { raw, cluster: cluster?.entries ?? new Map(), sensitiveOnCommandLine };
}
