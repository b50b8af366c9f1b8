import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { OptionType } from '../config/types';
import { type FsPluginDefinition, PLUGIN_CONTRACT_VERSION } from '../plugin-kit/fs-plugin';

/** The code of every plugin-loading failure. A start-up error (exit 2), not an HTTP error. */
export const PLUGIN_LOAD_FAILED = 'GW_PLUGIN_LOAD_FAILED';

/** A third-party plugin could not be loaded; start-up stops. Match on `code`, not `instanceof`. */
export class PluginLoadError extends Error {
  readonly code = PLUGIN_LOAD_FAILED;
  constructor(message: string, options?: { cause?: unknown }) {
    // One line: main prints it as the single line on stderr.
    super(message.replace(/\s*\n\s*/g, ' '), options);
    this.name = 'PluginLoadError';
  }
}

/** What a plugin folder's `manifest.json` declares. */
export interface PluginManifest {
  name: string;
  schemes: string[];
  /** Module path relative to the plugin folder; must stay inside it. */
  entry: string;
  contractVersion: number;
}

export interface LoadOptions {
  /** Plugins already present (the built-ins): a third-party plugin may not reuse their names or schemes. */
  builtins?: readonly FsPluginDefinition[];
  /** Option keys already declared (core, artifacts, built-in plugins): a plugin may not redeclare one. */
  optionKeys?: Iterable<string>;
}

const MANIFEST = 'manifest.json';
const NAME = /^[a-z0-9][a-z0-9._-]*$/;
// RFC 3986 scheme syntax, lower-case only: the registry looks schemes up as `URL.protocol` gives them.
const SCHEME = /^[a-z][a-z0-9+.-]*$/;
const OPTION_TYPES: Record<OptionType, true> = {
  string: true,
  int: true,
  double: true,
  boolean: true,
  duration: true,
  memory: true,
  map: true,
  list: true,
  enum: true,
  url: true,
};

/**
 * Loads every third-party filesystem plugin under `dir` (the value of `gateway.plugins.dir`): each
 * sub-folder holds a `manifest.json` `{ name, schemes, entry, contractVersion }` and the entry module,
 * which exports the definition as `plugin` or `default`. Every sub-folder must be a valid plugin; the
 * first one that is not throws a `GW_PLUGIN_LOAD_FAILED` error naming the folder and the cause, so a
 * broken plugin stops start-up instead of being skipped. Plain files in `dir` are ignored.
 */
export function loadThirdPartyPlugins(dir: string, options: LoadOptions = {}): FsPluginDefinition[] {
  const root = resolve(dir);
  let names: string[];
  try {
    names = readdirSync(root).sort();
  } catch (err) {
    throw new PluginLoadError(`cannot read the plugins directory ${root}, set in gateway.plugins.dir (${errnoText(err)})`, { cause: err });
  }
  if (names.includes(MANIFEST)) {
    throw new PluginLoadError(
      `${root} holds a ${MANIFEST} itself: gateway.plugins.dir must be the directory that contains the plugin folders, not a plugin folder`,
    );
  }
  const builtins = options.builtins ?? [];
  const byScheme = new Map<string, string>(builtins.flatMap((p) => p.schemes.map((s) => [s, `the built-in plugin '${p.name}'`] as const)));
  const byName = new Map<string, string>(builtins.map((p) => [p.name, 'a built-in plugin']));
  const optionKeys = new Map<string, string>([...(options.optionKeys ?? [])].map((k) => [k, 'the gateway']));
  const loaded: FsPluginDefinition[] = [];
  for (const name of names) {
    const folder = join(root, name);
    if (!isDirectory(folder)) continue; // README, .DS_Store and the like
    const plugin = loadPlugin(folder);
    const where = `plugin '${plugin.name}' in ${folder}`;
    const nameOwner = byName.get(plugin.name);
    if (nameOwner) throw new PluginLoadError(`${where}: the name '${plugin.name}' is already taken by ${nameOwner}; rename the plugin`);
    for (const scheme of plugin.schemes) {
      const owner = byScheme.get(scheme);
      if (owner)
        throw new PluginLoadError(`${where} claims the scheme '${scheme}', which ${owner} already serves; each scheme has one plugin`);
    }
    for (const opt of plugin.options) {
      const owner = optionKeys.get(opt.key);
      if (owner)
        throw new PluginLoadError(
          `${where} declares the option ${opt.key}, which ${owner} already declares; prefix its options with the plugin name`,
        );
    }
    byName.set(plugin.name, `the plugin in ${folder}`);
    for (const scheme of plugin.schemes) byScheme.set(scheme, `the plugin '${plugin.name}' in ${folder}`);
    for (const opt of plugin.options) optionKeys.set(opt.key, `the plugin '${plugin.name}' in ${folder}`);
    loaded.push(plugin);
  }
  return loaded;
}

/** Reads, checks and loads one plugin folder. */
function loadPlugin(folder: string): FsPluginDefinition {
  const manifestPath = join(folder, MANIFEST);
  if (!existsSync(manifestPath)) {
    throw new PluginLoadError(
      `the plugin folder ${folder} has no ${MANIFEST} (every sub-folder of gateway.plugins.dir must be a plugin; move other folders elsewhere)`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(manifestPath, 'utf8'));
  } catch (err) {
    throw new PluginLoadError(`the plugin manifest ${manifestPath} cannot be read: ${(err as Error).message}`, { cause: err });
  }
  const manifest = checkManifest(json, folder);
  const where = `plugin '${manifest.name}' in ${folder}`;

  const entry = resolveEntry(folder, manifest.entry, where);
  let mod: unknown;
  try {
    // require() on purpose: plugins are CommonJS (or ESM without top-level await, which Node 24
    // also loads synchronously), and start-up stays synchronous.
    mod = require(entry);
  } catch (err) {
    throw new PluginLoadError(`${where}: loading ${manifest.entry} failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
  const exported = mod as { plugin?: unknown; default?: unknown } | null | undefined;
  const def = exported?.plugin ?? exported?.default;
  const problems = checkDefinition(def, manifest);
  if (problems.length > 0) throw new PluginLoadError(`${where}: ${manifest.entry} ${problems.join('; ')}`);
  return def as FsPluginDefinition;
}

function checkManifest(json: unknown, folder: string): PluginManifest {
  const at = `the manifest of ${folder}`;
  if (json === null || typeof json !== 'object' || Array.isArray(json)) throw new PluginLoadError(`${at} is not a JSON object`);
  const m = json as Record<string, unknown>;
  const label = typeof m.name === 'string' && m.name !== '' ? `plugin '${m.name}' in ${folder}` : `the plugin in ${folder}`;
  // The version first: a manifest written for another contract may differ in every other field.
  if (m.contractVersion !== undefined && typeof m.contractVersion === 'number' && m.contractVersion !== PLUGIN_CONTRACT_VERSION) {
    throw new PluginLoadError(`${label} declares contract version ${m.contractVersion}; this gateway supports ${PLUGIN_CONTRACT_VERSION}`);
  }
  const problems: string[] = [];
  if (typeof m.name !== 'string' || !NAME.test(m.name)) problems.push('"name" must be a lower-case name (a-z, 0-9, ".", "_", "-")');
  if (!Array.isArray(m.schemes) || m.schemes.length === 0) {
    problems.push('"schemes" must be a non-empty array of URI schemes');
  } else {
    for (const s of m.schemes) {
      if (typeof s !== 'string' || !SCHEME.test(s))
        problems.push(`scheme ${JSON.stringify(s)} is not a lower-case URI scheme (e.g. "myfs")`);
    }
    if (new Set(m.schemes).size !== m.schemes.length) problems.push('"schemes" lists a scheme twice');
  }
  if (typeof m.entry !== 'string' || m.entry.trim() === '')
    problems.push('"entry" must be the path of the plugin module, relative to the plugin folder');
  if (!Number.isInteger(m.contractVersion))
    problems.push(`"contractVersion" must be an integer (this gateway supports ${PLUGIN_CONTRACT_VERSION})`);
  if (problems.length > 0) throw new PluginLoadError(`${at} is invalid: ${problems.join('; ')}`);
  return m as unknown as PluginManifest;
}

/** The entry module's real path, which must lie inside the plugin folder (no `..`, no absolute path, no link leading out). */
function resolveEntry(folder: string, entry: string, where: string): string {
  const escapes = (base: string, path: string) => {
    const rel = relative(base, path);
    return rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel);
  };
  const path = resolve(folder, entry);
  if (escapes(folder, path)) throw new PluginLoadError(`${where}: the entry '${entry}' points outside the plugin folder`);
  let real: string;
  try {
    real = realpathSync(path);
  } catch (err) {
    throw new PluginLoadError(`${where}: the entry '${entry}' does not exist (${errnoText(err)})`, { cause: err });
  }
  if (escapes(realpathSync(folder), real))
    throw new PluginLoadError(`${where}: the entry '${entry}' is a link leading outside the plugin folder`);
  if (!statSync(real).isFile()) throw new PluginLoadError(`${where}: the entry '${entry}' is not a file`);
  return real;
}

/** What is wrong with an exported definition, phrased to follow "<entry> ...". */
function checkDefinition(def: unknown, manifest: PluginManifest): string[] {
  if (def === null || typeof def !== 'object') {
    return [
      'exports no plugin definition: export it as `plugin` (module.exports.plugin = { name, schemes, options, create }) or as `default`',
    ];
  }
  const d = def as Record<string, unknown>;
  const problems: string[] = [];
  if (d.name !== manifest.name) problems.push(`exports a plugin named ${JSON.stringify(d.name)}, but the manifest says '${manifest.name}'`);
  const schemes = Array.isArray(d.schemes) ? d.schemes : undefined;
  if (!schemes || schemes.length !== manifest.schemes.length || !manifest.schemes.every((s) => schemes.includes(s))) {
    problems.push(`exports the schemes ${JSON.stringify(d.schemes)}, but the manifest says ${JSON.stringify(manifest.schemes)}`);
  }
  if (typeof d.create !== 'function') problems.push('exports no create(ctx) function');
  if (!Array.isArray(d.options)) {
    problems.push('exports no options array (use [] when the plugin has no options)');
  } else {
    for (const o of d.options as unknown[]) {
      const opt = o as Record<string, unknown> | null;
      const key = typeof opt?.key === 'string' && opt.key !== '' ? opt.key : undefined;
      if (!key) problems.push(`declares an option without a key: ${JSON.stringify(o)}`);
      else if (typeof opt?.type !== 'string' || !(opt.type in OPTION_TYPES))
        problems.push(`declares the option ${key} with an unknown type ${JSON.stringify(opt?.type)}`);
      else if (typeof opt.description !== 'string' || typeof opt.section !== 'string')
        problems.push(`declares the option ${key} without a description and section (both are shown in --help and the docs)`);
    }
  }
  return problems;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory(); // follows links: a linked plugin folder counts
  } catch (err) {
    // A dangling link may have been meant as a plugin folder: say so rather than skip it.
    throw new PluginLoadError(`cannot read ${path} in the plugins directory: ${errnoText(err)}`, { cause: err });
  }
}

function errnoText(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
}
