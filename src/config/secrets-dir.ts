import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Configuration, RawEntry } from './registry';
import { coreOptions } from './options';
import { ConfigError } from './registry';

export const SECRETS_DIR_KEY = 'gateway.secrets.dir';

/**
 * Reads option values from a directory of files named after the option keys, the way Kubernetes
 * mounts a Secret (`s3.secret-key`, `fs.azure.account.key.<account>.blob.core.windows.net`, ...).
 * Dot-files (Kubernetes' `..data` links) are skipped; one trailing newline is removed.
 */
export function readSecretsDir(dir: string): Map<string, RawEntry> {
  const out = new Map<string, RawEntry>();
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    throw new ConfigError([
      { key: SECRETS_DIR_KEY, source: dir, message: `cannot read the directory: ${(err as NodeJS.ErrnoException).code}` },
    ]);
  }
  for (const name of names.sort()) {
    if (name.startsWith('.')) continue;
    const path = join(dir, name);
    if (!statSync(path).isFile()) continue;
    out.set(name, { value: readFileSync(path, 'utf8').replace(/\r?\n$/, ''), source: `secret file ${path}` });
  }
  return out;
}

/** A cheap fingerprint of the directory (names, sizes, mtimes) to notice rotated secrets. */
export function secretsFingerprint(dir: string): string {
  try {
    return readdirSync(dir)
      .filter((n) => !n.startsWith('.'))
      .sort()
      .map((n) => {
        const st = statSync(join(dir, n));
        return `${n}:${st.size}:${st.mtimeMs}`;
      })
      .join('|');
  } catch {
    return 'unreadable';
  }
}

/**
 * Polls a secrets directory and calls `onChange` when it changed (Kubernetes swaps Secret volumes
 * atomically through symlinks, which file watchers miss). Returns the function that stops it.
 */
export function watchSecretsDir(dir: string, intervalMs: number, onChange: () => void): () => void {
  let last = secretsFingerprint(dir);
  const timer = setInterval(() => {
    const now = secretsFingerprint(dir);
    if (now !== last) {
      last = now;
      onChange();
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * gateway.secrets.dir followed (every `gateway.secrets.poll-interval`): on a change, each listener
 * gets the reloaded configuration (read once per change, on first use; a reload that fails is each
 * listener's to report or ignore). Returns how to stop, or undefined when no directory is set or
 * there is nothing to reload it with.
 */
export function followSecretsDir(
  config: Configuration,
  reload: (() => Configuration) | undefined,
  listeners: ((current: () => Configuration, dir: string) => void)[],
): (() => void) | undefined {
  const dir = config.getOptional(coreOptions.secretsDir);
  if (!dir || !reload) return undefined;
  return watchSecretsDir(dir, config.get(coreOptions.secretsPollInterval), () => {
    let next: Configuration | undefined;
    const current = () => (next ??= reload());
    for (const listener of listeners) listener(current, dir);
  });
}
