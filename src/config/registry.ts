import type { EnumOptionDef, OptionDef, OptionType, OptionValueMap } from './types';
import { formatValue, parseMap, parseValue } from './types';

/**
 * A rule across options (a key pair that goes together, a mode that needs another option), declared
 * next to its options — core, an fs-plugin, a token provider — and evaluated by the registry when
 * the configuration is resolved, so its problems are reported with every other one.
 */
export interface ConfigRule {
  /** The options the rule relates (exact keys or `<name>` templates). */
  keys: readonly string[];
  /** One sentence for docs/configuration.md. */
  description: string;
  /**
   * `files`: the rule reads files or directories the options name (a certificate, the tokens file,
   * a private directory). Such rules run at start-up and on every reload, and are skipped by
   * callers that only validate values on another machine (the manifest tests: paths inside a pod).
   */
  reads?: 'files';
  /**
   * `warning`: what the rule finds is told at start-up (a logged notice naming the key) instead of
   * failing it — for keys the gateway recognises but does not act on, so that nothing is silently ignored.
   */
  severity?: 'warning';
  /** What is wrong, each naming the key the operator should change (its source is added). */
  check(config: Configuration): readonly { key: string; message: string }[];
}

export interface ConfigProblem {
  key: string;
  source: string;
  message: string;
}

/** Raised when start-up configuration is invalid; lists every problem at once. */
export class ConfigError extends Error {
  readonly code = 'GW_CONFIG_INVALID';
  constructor(readonly problems: ConfigProblem[]) {
    super(
      `invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n` +
        problems.map((p) => `  - ${p.key} (from ${p.source}): ${p.message}`).join('\n'),
    );
  }
}

/** A raw value together with where it came from, for error messages. */
export interface RawEntry {
  value: unknown;
  source: string;
  /** Set when the value was given under a deprecated name of its option. */
  deprecatedKey?: string;
}

/**
 * Namespaces the gateway owns: an unknown key there is a typo and fails start-up. Flink's
 * `user.artifacts.*` and `web.submit.jar-uri.*` are not among them (Flink and FLIP-613 define keys
 * there, and a newer JobManager's configuration read through gateway.cluster.flink-conf may carry
 * keys this gateway does not know yet); the gateway's own keys in them are FLIP-613's proposed ones,
 * and unknown keys are kept and reported as unused (a warning at start).
 */
const OWNED_PREFIXES = ['gateway.'] as const;
const FLINK_ARTIFACT_PREFIXES = ['user.artifacts.', 'web.submit.jar-uri.'] as const;

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The keys a declared key stands for: itself, or every key matching its `<name>` template. */
function keyPattern(key: string): RegExp {
  return templateToRegExp(key) ?? new RegExp(`^${escapeRegExp(key)}$`);
}

function templateToRegExp(key: string): RegExp | undefined {
  if (!key.includes('<')) return undefined;
  const parts = key.split(/<[^>]+>/).map(escapeRegExp);
  return new RegExp(`^${parts.join('(.+?)')}$`);
}

/**
 * One registry for every option: validates, documents and drives redaction. Keys not declared here
 * are kept as raw strings (a shared Flink config file carries many keys that are not ours), except in
 * namespaces the gateway owns, where an unknown key is a typo and fails start-up.
 */
export class OptionsRegistry {
  private readonly exact = new Map<string, OptionDef>();
  private readonly templates: { re: RegExp; def: OptionDef }[] = [];
  /** Deprecated key → its option. */
  private readonly deprecated = new Map<string, OptionDef>();

  private readonly rules: ConfigRule[] = [];

  constructor(
    defs: Iterable<OptionDef>,
    rules: Iterable<ConfigRule> = [],
    private readonly ownedPrefixes: readonly string[] = OWNED_PREFIXES,
  ) {
    for (const def of defs) this.add(def);
    for (const rule of rules) this.addRule(rule);
  }

  /** A rule across options; its keys must be declared (a rule about an unknown key is a typo). */
  addRule(rule: ConfigRule): void {
    for (const key of rule.keys) {
      if (!this.lookup(key) && !this.templates.some((t) => t.def.key === key))
        throw new Error(`rule '${rule.description}' names ${key}, which is not declared`);
    }
    this.rules.push(rule);
  }

  add(def: OptionDef): void {
    const re = templateToRegExp(def.key);
    const taken = (key: string) => this.exact.has(key) || this.deprecated.has(key) || this.templates.some((t) => t.def.key === key);
    if (taken(def.key)) throw new Error(`option ${def.key} is declared twice`);
    for (const old of def.deprecatedKeys ?? []) {
      if (re || old.includes('<')) throw new Error(`option ${def.key}: deprecated keys are for exact keys only`);
      if (taken(old) || old === def.key) throw new Error(`option ${def.key}: deprecated key ${old} is declared twice`);
      this.deprecated.set(old, def);
    }
    if (re) this.templates.push({ re, def });
    else this.exact.set(def.key, def);
  }

  /** The option a deprecated key stands for, if `key` is one. */
  deprecatedOf(key: string): OptionDef | undefined {
    return this.deprecated.get(key);
  }

  /** Every deprecated key with its option (the environment is read under these names too). */
  deprecatedKeys(): [string, OptionDef][] {
    return [...this.deprecated];
  }

  /** The definition for a concrete key (exact, or matching a `<name>` template). */
  lookup(key: string): OptionDef | undefined {
    return this.exact.get(key) ?? this.templates.find((t) => t.re.test(key))?.def;
  }

  all(): OptionDef[] {
    return [...this.exact.values(), ...this.templates.map((t) => t.def)];
  }

  /** A declared option's own flag wins (gateway.secrets.dir is a path); else the name heuristic. */
  isSensitive(key: string): boolean {
    const def = this.lookup(key) ?? this.deprecated.get(key);
    return def ? def.sensitive === true : looksSensitive(key);
  }

  /**
   * Validates raw entries — each value, each option's own check, then every rule — collecting every
   * problem (`ConfigError`), and returns the resolved configuration. `files: false` skips the rules
   * that read the files the options name (for checking a configuration meant for another machine).
   */
  resolve(input: Map<string, RawEntry>, cluster: ReadonlyMap<string, string> = new Map(), opts: { files?: boolean } = {}): Configuration {
    const problems: ConfigProblem[] = [];
    const notices: ConfigProblem[] = [];
    const values = new Map<string, unknown>();
    const raw = this.foldPrefixMaps(this.renameDeprecated(input));
    for (const [key, entry] of raw) {
      if (entry.deprecatedKey !== undefined) {
        notices.push({ key: entry.deprecatedKey, source: entry.source, message: `deprecated key; use ${key} instead (it means the same)` });
      }
      const def = this.lookup(key);
      if (!def) {
        if (this.ownedPrefixes.some((p) => key.startsWith(p))) {
          problems.push({ key, source: entry.source, message: `unknown option${suggest(key, this.all())}` });
        } else {
          if (FLINK_ARTIFACT_PREFIXES.some((p) => key.startsWith(p))) {
            notices.push({
              key,
              source: entry.source,
              message: `not an option the gateway uses; kept for Flink and ignored here${suggest(key, this.all())}`,
            });
          }
          values.set(key, entry.value === null || entry.value === undefined ? '' : String(entry.value));
        }
        continue;
      }
      let value: unknown;
      try {
        value = parseValue(def, entry.value);
      } catch (err) {
        // The parsers quote the value they refuse; a sensitive one is never echoed.
        problems.push({
          key,
          source: entry.source,
          message: def.sensitive ? 'invalid value (not shown: the option is sensitive)' : (err as Error).message,
        });
        continue;
      }
      values.set(key, value);
      for (const message of asList(def.check?.(value as never))) problems.push({ key, source: entry.source, message });
    }
    const config = new Configuration(this, values, notices, Object.fromEntries(cluster));
    problems.push(...this.checkRules(config, raw, problems, opts.files !== false, notices));
    if (problems.length > 0) throw new ConfigError(problems);
    return config;
  }

  /**
   * Evaluates every rule on the values that parsed. A rule about an option whose value is already
   * reported as bad is skipped: its verdict would rest on a value the operator must change anyway.
   */
  private checkRules(
    config: Configuration,
    raw: Map<string, RawEntry>,
    known: readonly ConfigProblem[],
    files: boolean,
    notices: ConfigProblem[],
  ): ConfigProblem[] {
    const out: ConfigProblem[] = [];
    for (const rule of this.rules) {
      if (rule.reads === 'files' && !files) continue;
      const matchers = rule.keys.map(keyPattern);
      if (known.some((p) => matchers.some((m) => m.test(p.key)))) continue;
      // A warning rule's findings join the notices (logged at start-up), never the problems.
      const sink = rule.severity === 'warning' ? notices : out;
      for (const { key, message } of rule.check(config)) {
        sink.push({ key, source: raw.get(key)?.source ?? 'not set', message });
      }
    }
    return out;
  }

  /** Every rule, for the generated docs. */
  allRules(): readonly ConfigRule[] {
    return this.rules;
  }

  /**
   * Deprecated keys become their option's key. A value already under the option's own key wins
   * (sources that load in precedence order translate keys as they load, see `loadRaw`).
   */
  private renameDeprecated(raw: Map<string, RawEntry>): Map<string, RawEntry> {
    const out = new Map<string, RawEntry>();
    for (const [key, entry] of raw) {
      const def = this.deprecated.get(key);
      if (!def) out.set(key, entry);
      else if (!raw.has(def.key) && !out.has(def.key)) out.set(def.key, { ...entry, deprecatedKey: key });
    }
    return out;
  }

  /**
   * Flink 2.x flattens a nested YAML map into prefix keys (`user.artifacts.http-headers.Authorization:
   * Bearer x`) and reads map options in that form too: such keys join their map option's value
   * (a key that is itself a declared option, like `….hosts`, stays that option).
   */
  private foldPrefixMaps(raw: Map<string, RawEntry>): Map<string, RawEntry> {
    const out = new Map(raw);
    for (const def of this.exact.values()) {
      if (def.type !== 'map') continue;
      const prefix = `${def.key}.`;
      const folded: Record<string, string> = {};
      let source: string | undefined;
      for (const [key, entry] of raw) {
        if (!key.startsWith(prefix) || this.lookup(key) !== undefined) continue;
        folded[key.slice(prefix.length)] = entry.value === null || entry.value === undefined ? '' : String(entry.value);
        source ??= entry.source;
        out.delete(key);
      }
      if (source === undefined) continue;
      const base = raw.get(def.key);
      let merged: Record<string, string> = folded;
      if (base !== undefined) {
        const parsed =
          typeof base.value === 'object' && base.value !== null ? (base.value as Record<string, string>) : parseMap(String(base.value));
        merged = { ...parsed, ...folded };
      }
      out.set(def.key, { value: merged, source: base?.source ?? source });
    }
    return out;
  }

  /** Markdown reference, generated so the docs cannot drift from the code. */
  toMarkdown(): string {
    const sections = new Map<string, OptionDef[]>();
    for (const def of this.all()) {
      const list = sections.get(def.section) ?? [];
      list.push(def);
      sections.set(def.section, list);
    }
    const lines = [
      '# Configuration reference',
      '',
      '<!-- Generated from the options registry by `npm run docs:config`; a test fails when it is stale. -->',
      '',
      'Sources, lowest precedence first: defaults → YAML file (`--config <file>`) → environment',
      '(`FLINK_GATEWAY_<KEY>`, the key upper-cased with `.` and `-` as `_`, e.g. `FLINK_GATEWAY_REST_PORT`) →',
      '`-D key=value` on the command line. Every value is validated at start; all problems are reported together.',
      'Keys marked *sensitive* are redacted in logs and never echoed; prefer a file or the environment for them,',
      'since a `-D` value is visible in the process list.',
      '',
      "Namespaces: `gateway.*` and `web.submit.jar-uri.*` are the gateway's own, so an unknown key there is a typo and",
      "fails start-up. `user.artifacts.*` is Flink's: the gateway reads FLIP-613's proposed keys there",
      "(`user.artifacts.job-jar`, `.fetch-timeout`, `.max-size`, `.max-concurrent-fetches`) and Flink's own",
      '(`.base-dir`, `.artifact-list`, `.raw-http-enabled`, `.http-headers`); any other key there is kept for Flink',
      'and logged at start as unused. The keys the gateway once invented under `user.artifacts.*` moved to',
      '`gateway.artifacts.*`; their old names still work, each with a start-up warning (listed as *Deprecated key*).',
      '',
    ];
    for (const [section, defs] of sections) {
      lines.push(`## ${section}`, '', '| Key | Type | Default | Description |', '| --- | --- | --- | --- |');
      for (const d of defs) {
        const type = d.type === 'enum' ? `enum (${d.values?.join(', ')})` : d.type;
        const deprecated = d.deprecatedKeys?.length
          ? ` Deprecated key${d.deprecatedKeys.length > 1 ? 's' : ''}: ${d.deprecatedKeys.map((k) => `\`${k}\``).join(', ')}.`
          : '';
        const desc = (d.sensitive ? '*sensitive.* ' : '') + (d.description + deprecated).replace(/\|/g, '\\|');
        lines.push(`| \`${d.key}\` | ${type} | ${formatValue(d, d.default).replace(/\|/g, '\\|') || '""'} | ${desc} |`);
      }
      lines.push('');
    }
    if (this.rules.length > 0) {
      lines.push(
        '## Rules across options',
        '',
        'Checked at start with the values above; each broken rule is reported with the other problems (a *warning* is logged and start-up goes on).',
        '',
      );
      for (const rule of this.rules) {
        const keys = rule.keys.map((k) => `\`${k}\``).join(', ');
        lines.push(`- ${rule.severity === 'warning' ? '*warning* ' : ''}${keys}${keys ? ': ' : ''}${rule.description}`);
      }
      lines.push('');
    }
    return lines.join('\n');
  }
}

function asList(result: string | readonly string[] | undefined): readonly string[] {
  return result === undefined ? [] : typeof result === 'string' ? [result] : result;
}

const SENSITIVE_HINT =
  /(secret|password|passwd|token|credential|private[-_.]?key|access[-_.]?key|account\.key|sas|authorization|http[-_.]headers?|http\.header)/i;

/** Heuristic for keys we do not declare (e.g. inside a request's flinkConfiguration). */
export function looksSensitive(key: string): boolean {
  return SENSITIVE_HINT.test(key);
}

function suggest(key: string, defs: OptionDef[]): string {
  let best: string | undefined;
  let bestScore = Infinity;
  for (const d of defs) {
    const score = distance(key, d.key);
    if (score < bestScore) {
      bestScore = score;
      best = d.key;
    }
  }
  return best && bestScore <= 4 ? `; did you mean '${best}'?` : '';
}

function distance(a: string, b: string): number {
  const dp = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let prev = dp[0]!;
    dp[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = dp[j]!;
      dp[j] = Math.min(dp[j]! + 1, dp[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return dp[b.length]!;
}

/** Resolved, immutable configuration. */
export class Configuration {
  constructor(
    readonly registry: OptionsRegistry,
    private readonly values: ReadonlyMap<string, unknown>,
    /** What start-up should tell the operator without failing: deprecated keys, unused Flink keys. */
    readonly notices: readonly ConfigProblem[] = [],
    /**
     * The cluster's own Flink configuration (gateway.cluster.flink-conf) as the JobManager has it,
     * secrets included: the base of every job's effective configuration. Empty without that file.
     */
    readonly cluster: Readonly<Record<string, string>> = {},
  ) {}

  /** Typed read of a declared option that has a default. */
  get<V extends string>(def: EnumOptionDef<V>): V;
  get<T extends OptionType>(def: OptionDef<T>): OptionValueMap[T];
  get<T extends OptionType>(def: OptionDef<T>): OptionValueMap[T] {
    const v = this.getOptional(def);
    if (v === undefined) throw new Error(`option ${def.key} has no value and no default`);
    return v;
  }

  /** Typed read of a declared option that may be unset. */
  getOptional<V extends string>(def: EnumOptionDef<V>): V | undefined;
  getOptional<T extends OptionType>(def: OptionDef<T>): OptionValueMap[T] | undefined;
  getOptional<T extends OptionType>(def: OptionDef<T>): OptionValueMap[T] | undefined {
    return (this.values.has(def.key) ? this.values.get(def.key) : def.default) as OptionValueMap[T] | undefined;
  }

  /** Read of any key (declared or not) as parsed: typed for a declared option, a string otherwise; unset = undefined. */
  value(key: string): unknown {
    return this.values.get(key);
  }

  keys(): string[] {
    return [...this.values.keys()];
  }

  /** Explicitly set keys matching a `<name>` template, e.g. all per-account keys. */
  family(templateKey: string): Map<string, unknown> {
    const re = templateToRegExp(templateKey);
    const out = new Map<string, unknown>();
    if (!re) return out;
    for (const [k, v] of this.values) if (re.test(k)) out.set(k, v);
    return out;
  }
}
