/**
 * Route ownership is decided on the path as Flink's router sees it, and on a stricter canonical
 * form, so that no encoding trick turns a jar route into a pass-through (ADR 0001, ADR 0009).
 *
 * Flink's view is exactly its router's (see `pathViews`: Netty decodes once, the Router splits and
 * decodes each segment again); the canonical form decodes until stable. When either view names a jar
 * route, the gateway handles the request itself; when the two views disagree there, it refuses.
 */

export type JarRouteName = 'list' | 'upload' | 'fetch' | 'delete' | 'plan' | 'run' | 'run-application';

export type Classification =
  | { kind: 'jar'; route: JarRouteName; jarId?: string; versioned: boolean }
  | { kind: 'jar-not-found' }
  | { kind: 'jar-noncanonical' }
  | { kind: 'pass-through' };

/** Splits like Flink's Router: drop slashes at both ends, then split on '/'. */
export function pathSegments(path: string): string[] {
  const trimmed = path.replace(/^\/+/, '').replace(/\/+$/, '');
  return trimmed === '' ? [] : trimmed.split('/');
}

function stripVersion(t: string[]): { rest: string[]; versioned: boolean } {
  return t[0] === 'v1' ? { rest: t.slice(1), versioned: true } : { rest: t, versioned: false };
}

function match(method: string, t: string[]): { route: JarRouteName; jarId?: string } | undefined {
  if (t[0] !== 'jars') return undefined;
  if (t.length === 1 && method === 'GET') return { route: 'list' };
  if (t.length === 2 && t[1] === 'upload' && method === 'POST') return { route: 'upload' };
  if (t.length === 2 && t[1] === 'fetch' && method === 'POST') return { route: 'fetch' };
  if (t.length === 2 && method === 'DELETE') return { route: 'delete', jarId: t[1]! };
  if (t.length === 3 && t[2] === 'plan' && (method === 'GET' || method === 'POST')) return { route: 'plan', jarId: t[1]! };
  if (t.length === 3 && t[2] === 'run' && method === 'POST') return { route: 'run', jarId: t[1]! };
  if (t.length === 3 && t[2] === 'run-application' && method === 'POST') return { route: 'run-application', jarId: t[1]! };
  return undefined;
}

/** The two views of a path the gateway decides on, or why the path has no single meaning. */
export type PathViews = { ok: true; flink: string[]; canonical: string[] } | { ok: false; reason: string };

const MAX_DECODINGS = 8;

/**
 * Flink's router, exactly: Netty's QueryStringDecoder ends the path at the first raw '?' or '#' and
 * decodes it once; Flink's Router then cuts that at a decoded '?', drops slashes at both ends, splits
 * on '/' and decodes every segment again. Next to it the canonical view (decoded until stable, then
 * split). A path on which those steps could disagree with what the gateway checks is refused rather
 * than modelled: a raw '#', an encoded '?' or '#' at any decoding depth, a control character, a
 * malformed escape or invalid UTF-8 (Netty replaces it, Node's decoder refuses it), or more than
 * eight levels of encoding. No Flink route needs any of these.
 */
export function pathViews(rawPath: string): PathViews {
  if (rawPath.includes('#')) return { ok: false, reason: "a raw '#' (Flink's HTTP decoder ends the path there)" };
  let current = rawPath;
  for (let depth = 0; ; depth++) {
    if (depth > 0 && /[?#]/.test(current)) return { ok: false, reason: "an encoded '?' or '#' (%3F, %23, at any depth of encoding)" };
    if (/[\u0000-\u001f\u007f]/.test(current)) return { ok: false, reason: 'an encoded control character' };
    if (!current.includes('%')) break;
    if (depth === MAX_DECODINGS) return { ok: false, reason: `more than ${MAX_DECODINGS} levels of percent-encoding` };
    let next: string;
    try {
      next = decodeURIComponent(current);
    } catch {
      return { ok: false, reason: 'a malformed percent-escape or one that is not UTF-8' };
    }
    if (next === current) break;
    current = next;
  }
  // Every level decodes cleanly (checked above), so the per-segment decoding cannot throw.
  const flink = pathSegments(decodeURIComponent(rawPath)).map((t) => decodeURIComponent(t));
  return { ok: true, flink, canonical: pathSegments(current) };
}

/** Classifies a request by method and raw path (without the query string), after `pathViews` accepted it. */
export function classify(method: string, rawPath: string): Classification {
  const views = pathViews(rawPath);
  if (!views.ok) return { kind: 'jar-noncanonical' };
  const flinkView = stripVersion(views.flink);
  const canonical = stripVersion(views.canonical);
  // Empty segments ("//") do not hide a jar route: they are ignored when deciding ownership.
  const touchesJars = [flinkView, canonical].some(
    (v) => stripVersion(pathSegments(v.rest.filter(Boolean).join('/'))).rest[0] === 'jars' || v.rest.filter(Boolean)[0] === 'jars',
  );
  if (!touchesJars) return { kind: 'pass-through' };
  const same =
    flinkView.versioned === canonical.versioned &&
    flinkView.rest.length === canonical.rest.length &&
    flinkView.rest.every((s, i) => s === canonical.rest[i]);
  if (!same) return { kind: 'jar-noncanonical' };
  const m = match(method, flinkView.rest);
  if (m) return { kind: 'jar', route: m.route, versioned: flinkView.versioned, ...(m.jarId !== undefined ? { jarId: m.jarId } : {}) };
  // A route a later Flink adds under /jars passes through, now that the path has one meaning. The
  // routes that run code stay the gateway's by name (any method, any other shape: 404), and so does
  // a path with empty or dot segments, which no Flink route has.
  if (namesCodeRunningRoute(flinkView.rest) || flinkView.rest.some((s) => s === '' || s === '.' || s === '..'))
    return { kind: 'jar-not-found' };
  return { kind: 'pass-through' };
}

/** Flink's jar routes that run a jar's code (upload, which puts it there, included), named anywhere in their place. */
const CODE_RUNNING = new Set(['run', 'plan', 'run-application']);

function namesCodeRunningRoute(rest: readonly string[]): boolean {
  const t = rest.filter(Boolean);
  return t[1] === 'upload' || CODE_RUNNING.has(t[2] ?? '');
}

/** The gateway's own home of POST /jars/fetch (which sits in Flink's namespace): POST /gateway/v1/jars/fetch. */
export const GATEWAY_FETCH_PATH = '/gateway/v1/jars/fetch';

/** Whether the request is `POST /gateway/v1/jars/fetch`, in a path with one meaning. */
export function isGatewayFetch(method: string, rawPath: string): boolean {
  if (method !== 'POST') return false;
  const views = pathViews(rawPath);
  const want = GATEWAY_FETCH_PATH.split('/').filter(Boolean);
  return views.ok && [views.flink, views.canonical].every((v) => v.length === want.length && v.every((s, i) => s === want[i]));
}

/**
 * Flink's JarIdPathParameter accepts a value only if it has no parent directory. The gateway is
 * stricter: a bare file name without separators, dot segments or control characters.
 */
export function isBareJarId(id: string): boolean {
  return (
    id.length > 0 &&
    id.length <= 255 &&
    id !== '.' &&
    id !== '..' &&
    // '?' and '#' would change the meaning of the URL the gateway forwards (Flink reads a query);
    // '%' survives our decoding but Flink decodes path parameters once more and fails with a 500.
    !/[/\\?#%\u0000-\u001f\u007f]/.test(id)
  );
}
