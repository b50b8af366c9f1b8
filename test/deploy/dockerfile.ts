/**
 * A small reader for the subset of Dockerfile syntax this project uses (no engine is available here to
 * build the image): instructions with line continuations and comment lines, `--flag=value` options,
 * exec (JSON) form, stages. Plus the .dockerignore matching rules of Docker's pattern matcher: a path
 * is excluded when the last pattern matching it or one of its parent directories is not a `!` pattern.
 */

export interface Instruction {
  keyword: string;
  /** Everything after the keyword and its --flags. */
  rest: string;
  flags: Map<string, string>;
  /** Exec form (`["node", "x.js"]`), when the rest is a JSON array. */
  exec?: string[];
  line: number;
}

export interface Stage {
  base: string;
  name?: string;
  instructions: Instruction[];
}

export function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  let pending = '';
  let startLine = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.replace(/\r$/, '');
    // Comment lines (and parser directives) are dropped, also in the middle of a continuation.
    if (/^\s*#/.test(line)) return;
    if (pending === '' && line.trim() === '') return;
    if (pending === '') startLine = i + 1;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      return;
    }
    pending += line;
    const ins = parseInstruction(pending.trim(), startLine);
    pending = '';
    if (ins.keyword === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.rest);
      if (!m) throw new Error(`line ${ins.line}: cannot read FROM ${ins.rest}`);
      stages.push({ base: m[1]!, ...(m[2] ? { name: m[2] } : {}), instructions: [ins] });
    } else {
      const stage = stages.at(-1);
      if (!stage) throw new Error(`line ${ins.line}: ${ins.keyword} before the first FROM`);
      stage.instructions.push(ins);
    }
  });
  if (pending.trim()) throw new Error('the Dockerfile ends in a line continuation');
  return stages;
}

function parseInstruction(text: string, line: number): Instruction {
  const m = /^(\S+)\s*(.*)$/s.exec(text)!;
  const keyword = m[1]!.toUpperCase();
  let rest = m[2]!.trim();
  const flags = new Map<string, string>();
  for (let f = /^--([a-z-]+)(?:=(\S*))?\s+/.exec(rest); f; f = /^--([a-z-]+)(?:=(\S*))?\s+/.exec(rest)) {
    flags.set(f[1]!, f[2] ?? 'true');
    rest = rest.slice(f[0].length);
  }
  const ins: Instruction = { keyword, rest, flags, line };
  if (rest.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(rest);
      if (Array.isArray(parsed) && parsed.every((s) => typeof s === 'string')) ins.exec = parsed as string[];
    } catch {
      // Shell form that happens to start with "[".
    }
  }
  return ins;
}

/** Sources and destination of a COPY/ADD (exec or shell form). */
export function copyPaths(ins: Instruction): { sources: string[]; dest: string } {
  const parts = ins.exec ?? ins.rest.split(/\s+/).filter(Boolean);
  if (parts.length < 2) throw new Error(`line ${ins.line}: ${ins.keyword} needs a source and a destination`);
  return { sources: parts.slice(0, -1), dest: parts.at(-1)! };
}

/** `KEY=value ...` pairs of an ENV/ARG (also the legacy `ENV KEY value` form; ARG defaults may be absent). */
export function assignments(ins: Instruction): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  const tokens = ins.rest.match(/(?:[^\s"']+|"(?:\\.|[^"\\])*"|'[^']*')+/g) ?? [];
  if (ins.keyword === 'ENV' && tokens.length > 0 && !tokens[0]!.includes('=')) {
    out.set(tokens[0]!, unquote(tokens.slice(1).join(' ')));
    return out;
  }
  for (const t of tokens) {
    const i = t.indexOf('=');
    if (i < 0) out.set(t, undefined);
    else out.set(t.slice(0, i), unquote(t.slice(i + 1)));
  }
  return out;
}

function unquote(v: string): string {
  return /^".*"$|^'.*'$/s.test(v) ? v.slice(1, -1) : v;
}

/** The paths a stage's working directory resolves `rel` to (WORKDIR as it stands at `ins`). */
export function workdirAt(stage: Stage, ins: Instruction): string {
  let dir = '/';
  for (const i of stage.instructions) {
    if (i === ins) break;
    if (i.keyword === 'WORKDIR') dir = i.rest.startsWith('/') ? i.rest : `${dir.replace(/\/$/, '')}/${i.rest}`;
  }
  return dir;
}

/** Docker's .dockerignore semantics for a path relative to the context root (forward slashes). */
export function dockerignoreMatcher(text: string): (path: string) => boolean {
  const patterns = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negated = l.startsWith('!');
      const p = (negated ? l.slice(1) : l).trim().replace(/^\/+/, '').replace(/\/+$/, '');
      return { negated, re: globToRegExp(p) };
    });
  return (path) => {
    const clean = path.replace(/^\.\//, '').replace(/\/+$/, '');
    const parts = clean.split('/');
    const candidates = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const p of patterns) {
      if (candidates.some((c) => p.re.test(c))) excluded = !p.negated;
    }
    return excluded;
  };
}

function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (glob.startsWith('**/', i)) {
      re += '(?:.*/)?';
      i += 2;
    } else if (glob.startsWith('**', i)) {
      re += '.*';
      i += 1;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = glob.indexOf(']', i);
      re += end > i ? glob.slice(i, end + 1) : '\\[';
      if (end > i) i = end;
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}
