import { GatewayError } from '../errors/gateway-error';
import { redactUri } from '../plugin-kit/uri';

/**
 * `gateway.artifacts.allowed-uris`: which jar URIs this cluster may run, as prefixes or patterns.
 *
 * An entry is `<scheme>://<authority><path>`, compared with the submitted URI after both are
 * normalised by the WHATWG URL parser (scheme and host lower-cased, default ports and dot segments
 * removed) and percent-decoded:
 * - scheme: exact (`s3a` is not `s3`);
 * - authority (bucket, `container@account.blob.core.windows.net`, `host[:port]`): exact, or a
 *   pattern where `*` stands for any run of characters except `/`, `@` and `:`
 *   (`https://*.artifacts.example.com/…`);
 * - path without `*`: a prefix on a segment boundary — `s3://jobs/team-a` allows `s3://jobs/team-a/x.jar`
 *   but not `s3://jobs/team-a-evil/x.jar`; an empty path allows the whole bucket or host;
 * - path with `*`: a pattern matched against the whole path, `*` within one segment, `**` across segments.
 * The query string (`?versionId=`, a SAS) is not part of the match. A decoded path that still holds a
 * dot segment, a backslash or a control character is refused whenever the list is set, so an
 * encoded `..` cannot climb out of an allowed prefix at an origin that decodes it.
 */
export interface AllowListVerdict {
  /** The entry that matched, or `not configured` when the list is empty. */
  verdict: string;
}

interface Rule {
  entry: string;
  scheme: string;
  authority: RegExp;
  path: (path: string) => boolean;
}

const ENTRY = /^([a-z][a-z0-9+.-]*):\/\/([^/]*)(\/.*)?$/i;

function globToRegExp(glob: string, star: string, doubleStar?: string): RegExp {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && doubleStar !== undefined && glob[i + 1] === '*') {
      out += doubleStar;
      i++;
    } else if (c === '*') out += star;
    else out += c.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}

function decodePath(path: string): string | undefined {
  try {
    return decodeURIComponent(path);
  } catch {
    return undefined;
  }
}

/** The parts of a URI the list compares: lower-case scheme, authority as the URL parser wrote it, decoded path. */
function partsOf(uri: URL): { scheme: string; authority: string; path: string | undefined } {
  const scheme = uri.protocol.replace(/:$/, '').toLowerCase();
  const userinfo = uri.username ? `${decodePath(uri.username) ?? uri.username}@` : '';
  return { scheme, authority: `${userinfo}${uri.host}`.toLowerCase(), path: decodePath(uri.pathname) };
}

export function parseRule(entry: string): Rule {
  const m = ENTRY.exec(entry.trim());
  if (!m)
    throw new Error(`'${entry}' is not a URI prefix or pattern (expected e.g. s3://bucket/jobs/ or https://*.example.com/releases/**.jar)`);
  // Normalise the literal parts the way a submitted URI will be (host case, default port, dot
  // segments); '*' survives the parser in hosts and paths of these schemes.
  let parsed: URL;
  try {
    parsed = new URL(entry.trim().replace(/\*/g, '__STAR__'));
  } catch {
    throw new Error(`'${entry}' does not parse as a URI`);
  }
  const { scheme, authority, path } = partsOf(parsed);
  if (path === undefined) throw new Error(`'${entry}' has a malformed percent-escape in its path`);
  const authorityGlob = authority.replace(/__star__/g, '*');
  const pathGlob = (m[3] === undefined ? '' : path).replace(/__STAR__/g, '*');
  const authorityRe = globToRegExp(authorityGlob, '[^/@:]*');
  if (pathGlob.includes('*')) {
    const re = globToRegExp(pathGlob, '[^/]*', '.*');
    return { entry: entry.trim(), scheme, authority: authorityRe, path: (p) => re.test(p) };
  }
  const prefix = pathGlob === '/' ? '' : pathGlob;
  return {
    entry: entry.trim(),
    scheme,
    authority: authorityRe,
    path: (p) => prefix === '' || p === prefix || p.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`),
  };
}

export class UriAllowList {
  private readonly rules: Rule[];

  /** Throws on the first malformed entry (start-up fails with the key named by the caller). */
  constructor(entries: readonly string[]) {
    this.rules = entries
      .map((e) => e.trim())
      .filter(Boolean)
      .map(parseRule);
  }

  get configured(): boolean {
    return this.rules.length > 0;
  }

  /**
   * Throws GW_FETCH_URI_NOT_ALLOWED unless `uri` matches an entry; `submitted` is the jar URI a
   * redirect came from, for the message. Returns the verdict for the audit log.
   */
  check(uri: URL, submitted?: URL): AllowListVerdict {
    if (!this.configured) return { verdict: 'not configured' };
    const { scheme, authority, path } = partsOf(uri);
    const refuse = (why: string) =>
      new GatewayError('GW_FETCH_URI_NOT_ALLOWED', {
        uri: submitted ? `${redactUri(submitted)} (redirected to ${redactUri(uri)})` : redactUri(uri),
        reason: why,
        allowed: this.rules.map((r) => r.entry).join('; '),
      });
    if (path === undefined || /(^|\/)\.{1,2}(\/|$)|[\\\u0000-\u001f\u007f]/.test(path)) {
      throw refuse('its decoded path holds a dot segment, a backslash or a control character');
    }
    const rule = this.rules.find((r) => r.scheme === scheme && r.authority.test(authority) && r.path(path));
    if (!rule) throw refuse('it matches no entry');
    return { verdict: `matched ${rule.entry}` };
  }
}
