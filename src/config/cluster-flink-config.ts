import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ConfigError } from './registry';
import { readFlatYaml } from './yaml-file';

/** The option naming the cluster's own Flink configuration (a file, or Flink's conf directory). */
export const CLUSTER_FLINK_CONF_KEY = 'gateway.cluster.flink-conf';

/**
 * Keys of the cluster's file that the gateway does not take for itself, because they describe the
 * JobManager's process and the gateway has a value of its own: where the JobManager listens
 * (`rest.port`, `rest.bind-address` — the gateway listens elsewhere, on its own keys) and the
 * JobManager's `web.upload.dir` (a path on the JobManager's filesystem, which the gateway may not
 * share; the gateway's `web.upload.dir` is that directory as the gateway sees it). They stay part of
 * the cluster's configuration that jobs and token providers see.
 */
export const JOBMANAGER_OWN_KEYS: ReadonlySet<string> = new Set(['rest.port', 'rest.bind-address', 'web.upload.dir']);

export interface ClusterFlinkConfig {
  /** The file read. */
  path: string;
  /** Its keys as Flink reads them: nested YAML flattened, lists joined with ';', every value a string. */
  entries: Map<string, string>;
}

/**
 * Reads the cluster's Flink configuration the way Flink does: Flink 2.x's `config.yaml` is standard
 * YAML (nesting flattened to dotted keys); Flink 1.x's legacy `flink-conf.yaml` is one `key: value`
 * per line with `#` comments. A directory is searched like `FLINK_CONF_DIR`: `config.yaml`, else
 * `flink-conf.yaml`.
 */
export function readClusterFlinkConfig(pathOrDir: string): ClusterFlinkConfig {
  const path = resolveFile(pathOrDir);
  if (basename(path) !== 'flink-conf.yaml') {
    // Flink flattens every mapping and reads lists as ';'-separated values.
    const entries = new Map<string, string>();
    for (const [k, v] of readFlatYaml(path, CLUSTER_FLINK_CONF_KEY))
      entries.set(k, Array.isArray(v) ? v.map(String).join(';') : v === null || v === undefined ? '' : String(v));
    return { path, entries };
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw problem(path, `cannot read the file: ${(err as Error).message}`);
  }
  return { path, entries: parseLegacy(text) };
}

function resolveFile(pathOrDir: string): string {
  let isDir = false;
  try {
    isDir = statSync(pathOrDir).isDirectory();
  } catch (err) {
    throw problem(pathOrDir, `cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!isDir) return pathOrDir;
  for (const name of ['config.yaml', 'flink-conf.yaml']) if (existsSync(join(pathOrDir, name))) return join(pathOrDir, name);
  throw problem(pathOrDir, 'the directory holds neither config.yaml nor flink-conf.yaml');
}

/** Flink 1.x's GlobalConfiguration: the text before '#', split at the first ': '. */
function parseLegacy(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const conf = line.split('#', 1)[0]!.trim();
    if (conf === '') continue;
    const at = conf.indexOf(': ');
    if (at <= 0) continue; // Flink warns and skips such a line
    const key = conf.slice(0, at).trim();
    const value = conf.slice(at + 2).trim();
    if (key !== '' && value !== '') out.set(key, value);
  }
  return out;
}

function problem(source: string, message: string): ConfigError {
  return new ConfigError([{ key: CLUSTER_FLINK_CONF_KEY, source, message }]);
}
