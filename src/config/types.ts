/**
 * Flink-style option types. Values arrive as strings (YAML scalars, env vars, `-D` flags) and are
 * parsed the way Flink parses them, so a key means the same thing in a Flink config file and here.
 */
export type OptionType = 'string' | 'int' | 'double' | 'boolean' | 'duration' | 'memory' | 'map' | 'list' | 'enum' | 'url';

export interface OptionValueMap {
  string: string;
  int: number;
  /** a finite decimal number, e.g. a ratio */
  double: number;
  boolean: boolean;
  /** milliseconds */
  duration: number;
  /** bytes */
  memory: number;
  map: Record<string, string>;
  list: string[];
  enum: string;
  /** an absolute URL as written (trimmed), checked by `parseUrl` */
  url: string;
}

export interface OptionDef<T extends OptionType = OptionType> {
  /** Exact key, or a template with one `<name>` placeholder for families such as per-account keys. */
  key: string;
  type: T;
  /** Default in its parsed form; `undefined` means "no default" (the option is unset). */
  default?: OptionValueMap[T];
  /** Documentation shown in docs/configuration.md and `--help`. */
  description: string;
  /** Credentials and the like: never logged, never echoed, redacted everywhere. */
  sensitive?: boolean;
  /** For `enum` options. */
  values?: readonly string[];
  /** Lower bound for `int`/`double`/`duration`/`memory`. */
  min?: number;
  max?: number;
  /** For `url` options: the protocols accepted, default `http:` and `https:`. */
  protocols?: readonly string[];
  /**
   * What the type cannot say about one value (an entry's syntax, a file that must be readable):
   * returns what is wrong — one message, or one per bad entry — or nothing. Runs on values that
   * were set (defaults are trusted), at resolve time, with every other problem. Method syntax on
   * purpose: it keeps `OptionDef<'list'>` assignable to `OptionDef`.
   */
  check?(value: OptionValueMap[T]): string | readonly string[] | undefined;
  /** Section heading in the generated docs. */
  section: string;
  /**
   * Earlier names of the option (Flink's `withDeprecatedKeys`): still read, with a start-up notice
   * naming the key to use instead; when both are set in the same source, this key wins.
   */
  deprecatedKeys?: readonly string[];
}

/** An `enum` option whose values are known to the type checker: `config.get` returns one of them. */
export interface EnumOptionDef<V extends string> extends OptionDef<'enum'> {
  values: readonly V[];
  default?: V;
}

/** Declares one option; the generic ties `default` to `type` (and an enum's value type to its `values`). */
export function option<const V extends string>(
  def: Omit<OptionDef<'enum'>, 'values' | 'default'> & { values: readonly V[]; default?: NoInfer<V> },
): EnumOptionDef<V>;
export function option<T extends OptionType>(def: OptionDef<T>): OptionDef<T>;
export function option(def: OptionDef): OptionDef {
  return def;
}

const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  milli: 1,
  millis: 1,
  millisecond: 1,
  milliseconds: 1,
  s: 1000,
  sec: 1000,
  secs: 1000,
  second: 1000,
  seconds: 1000,
  min: 60_000,
  m: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
  // Flink's TimeUtils also takes micro- and nanoseconds; the gateway keeps milliseconds (fractions).
  µs: 0.001,
  us: 0.001,
  micro: 0.001,
  micros: 0.001,
  microsecond: 0.001,
  microseconds: 0.001,
  ns: 0.000_001,
  nano: 0.000_001,
  nanos: 0.000_001,
  nanosecond: 0.000_001,
  nanoseconds: 0.000_001,
};

/** ISO-8601 as Java's Duration.parse reads it (Flink accepts it too): PnDTnHnMn.nS, signs allowed. */
const ISO_DURATION = /^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?$/i;

const MEMORY_UNITS: Record<string, number> = {
  b: 1,
  bytes: 1,
  k: 1024,
  kb: 1024,
  kibibytes: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mebibytes: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gibibytes: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1024 ** 4,
  tebibytes: 1024 ** 4,
};

/** Parses Flink's duration syntax: `30 s`, `2min`, `500ms`; a bare number is milliseconds. */
export function parseDuration(text: string): number {
  const iso = ISO_DURATION.exec(text.trim());
  if (iso && /[DHMS]/i.test(text)) {
    const [, sign, d, h, min, s, frac] = iso;
    const ms =
      Number(d ?? 0) * 86_400_000 +
      Number(h ?? 0) * 3_600_000 +
      Number(min ?? 0) * 60_000 +
      Number(s ?? 0) * 1000 +
      Number(`0.${frac ?? '0'}`) * 1000 * (String(s ?? '').startsWith('-') ? -1 : 1);
    return sign === '-' ? -ms : ms;
  }
  const m = /^\s*(\d+)\s*([a-zµ]*)\s*$/i.exec(text);
  if (!m) throw new Error(`'${text}' is not a duration (examples: 30 s, 2 min, 500 ms)`);
  const unit = (m[2] ?? '').toLowerCase() || 'ms';
  const factor = DURATION_UNITS[unit];
  if (factor === undefined)
    throw new Error(`'${text}' has an unknown time unit '${unit}' (use ns, µs, ms, s, min, h, d, or ISO-8601 such as PT30S)`);
  return Number(m[1]) * factor;
}

/** Parses Flink's memory-size syntax: `100 mb`, `1g`, `512kb`; a bare number is bytes. */
export function parseMemory(text: string): number {
  const m = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(text);
  if (!m) throw new Error(`'${text}' is not a memory size (examples: 512 mb, 1 gb)`);
  const unit = (m[2] ?? '').toLowerCase() || 'b';
  const factor = MEMORY_UNITS[unit];
  if (factor === undefined) throw new Error(`'${text}' has an unknown size unit '${unit}' (use b, kb, mb, gb)`);
  return Number(m[1]) * factor;
}

/**
 * Flink's map syntax `k1:v1,k2:v2`, split the way Flink's StructuredOptionsSplitter splits it: a
 * part in single or double quotes may hold `,` or `:` (a doubled quote is a literal one), e.g.
 * `'Authorization:Basic a,b',X-Key:'v:1'`. Unquoted, a value may still contain further colons.
 */
export function parseMap(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of splitEscaped(text, ',')) {
    if (part.text.trim() === '') continue;
    const kv = part.quoted ? splitEscaped(part.raw, ':') : undefined;
    let key: string;
    let value: string;
    if (kv && kv.length >= 2) {
      key = kv[0]!.text.trim();
      value = kv
        .slice(1)
        .map((p) => p.text)
        .join(':')
        .trim();
    } else {
      const i = part.text.indexOf(':');
      if (i <= 0) throw new Error(`'${part.text}' is not a 'key:value' pair`);
      key = part.text.slice(0, i).trim();
      value = part.text.slice(i + 1).trim();
    }
    if (key === '') throw new Error(`'${part.text}' is not a 'key:value' pair`);
    out[key] = value;
  }
  return out;
}

/** Splits on `delimiter` outside quotes; quotes are removed, a doubled quote inside is one quote. */
function splitEscaped(text: string, delimiter: string): { text: string; raw: string; quoted: boolean }[] {
  const parts: { text: string; raw: string; quoted: boolean }[] = [];
  let cur = '';
  let raw = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      const close = findClosingQuote(text, i, c);
      cur += text.slice(i + 1, close).replaceAll(c + c, c);
      raw += text.slice(i, close + 1);
      quoted = true;
      i = close;
    } else if (c === delimiter) {
      parts.push({ text: cur, raw, quoted });
      cur = '';
      raw = '';
      quoted = false;
    } else {
      cur += c;
      raw += c;
    }
  }
  parts.push({ text: cur, raw, quoted });
  return parts;
}

function findClosingQuote(text: string, open: number, quote: string): number {
  for (let i = open + 1; i < text.length; i++) {
    if (text[i] !== quote) continue;
    if (text[i + 1] === quote) {
      i++;
      continue;
    }
    return i;
  }
  throw new Error(`'${text}' has an unclosed ${quote} quote`);
}

export function parseValue<T extends OptionType>(def: OptionDef<T>, raw: unknown): OptionValueMap[T] {
  const text = typeof raw === 'string' ? raw : raw === null || raw === undefined ? '' : String(raw);
  let value: unknown;
  switch (def.type) {
    case 'string':
      value = text;
      break;
    case 'int': {
      if (!/^\s*-?\d+\s*$/.test(text)) throw new Error(`'${text}' is not an integer`);
      value = Number(text);
      break;
    }
    case 'double': {
      if (!/^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(text)) throw new Error(`'${text}' is not a number`);
      value = Number(text);
      break;
    }
    case 'boolean': {
      const t = text.trim().toLowerCase();
      if (t !== 'true' && t !== 'false') throw new Error(`'${text}' is not true or false`);
      value = t === 'true';
      break;
    }
    case 'duration':
      value = parseDuration(text);
      break;
    case 'memory':
      value = parseMemory(text);
      break;
    case 'map':
      value = typeof raw === 'object' && raw !== null ? stringMap(raw) : parseMap(text);
      break;
    case 'list':
      value = Array.isArray(raw)
        ? raw.map(String)
        : text
            .split(';')
            .map((s) => s.trim())
            .filter(Boolean);
      break;
    case 'url':
      value = parseUrl(text, def.protocols, def.sensitive === true);
      break;
    case 'enum': {
      const v = text.trim();
      if (!def.values?.includes(v)) throw new Error(`'${text}' is not one of ${def.values?.join(', ')}`);
      value = v;
      break;
    }
  }
  if (typeof value === 'number') {
    if (def.min !== undefined && value < def.min) throw new Error(`${text} is below the minimum ${def.min}`);
    if (def.max !== undefined && value > def.max) throw new Error(`${text} is above the maximum ${def.max}`);
  }
  return value as OptionValueMap[T];
}

const DEFAULT_PROTOCOLS = ['http:', 'https:'] as const;

/**
 * Checks a `url` option's value: absolute, one of `protocols`, and a plain endpoint — no user info
 * (credentials have their own, sensitive options; in a URL they would end up in logs), no query
 * and no fragment (nothing appends to them correctly). Returns the text as written, trimmed.
 * Messages never echo user info, nor the value of a sensitive option.
 */
export function parseUrl(text: string, protocols: readonly string[] = DEFAULT_PROTOCOLS, sensitive = false): string {
  const trimmed = text.trim();
  const allowed = protocols.map((p) => `${p}//`).join(' or ');
  let url: URL | undefined;
  try {
    // Without `scheme://`, WHATWG URL reads `host:8081` (or `user:pw@host`) as a scheme and a path.
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed)) url = new URL(trimmed);
  } catch {
    // reported below
  }
  if (url === undefined) {
    throw new Error(
      `${sensitive || trimmed.includes('@') ? 'the value' : `'${trimmed}'`} is not an absolute URL (example: ${protocols[0] ?? 'https:'}//host:port)`,
    );
  }
  if (!protocols.includes(url.protocol)) throw new Error(`must be a ${allowed} URL, not ${url.protocol}//`);
  if (url.username !== '' || url.password !== '')
    throw new Error('must not carry user info (user:password@); credentials go into their own options');
  if (url.search !== '' || url.hash !== '') throw new Error('must not carry a query string or fragment');
  return trimmed;
}

function stringMap(raw: object): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) out[k] = String(v);
  return out;
}

/** Renders a parsed value back into Flink syntax (for docs and `--help`). */
export function formatValue(def: OptionDef, value: unknown): string {
  if (value === undefined) return '(none)';
  switch (def.type) {
    case 'duration': {
      const ms = value as number;
      if (ms % 60_000 === 0 && ms !== 0) return `${ms / 60_000} min`;
      if (ms % 1000 === 0 && ms !== 0) return `${ms / 1000} s`;
      return `${ms} ms`;
    }
    case 'memory': {
      const b = value as number;
      for (const [u, f] of [
        ['gb', 1024 ** 3],
        ['mb', 1024 ** 2],
        ['kb', 1024],
      ] as const) {
        if (b % f === 0 && b !== 0) return `${b / f} ${u}`;
      }
      return `${b} b`;
    }
    case 'map':
      return Object.entries(value as Record<string, string>)
        .map(([k, v]) => `${k}:${v}`)
        .join(',');
    case 'list':
      return (value as string[]).join(';');
    default:
      return String(value);
  }
}
