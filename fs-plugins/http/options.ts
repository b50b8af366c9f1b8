import type { OptionDef } from '../../src/plugin-kit';

const SECTION = 'Remote jars: HTTP(S)';

/** The HTTP plugin's options. `gateway.artifacts.ca-bundle` is declared centrally and arrives as `ctx.ca`. */
export const httpOptions = {
  rawHttpEnabled: {
    key: 'user.artifacts.raw-http-enabled',
    type: 'boolean',
    default: false,
    section: SECTION,
    description: "Allow plain http:// jar URIs and redirects to http:// (Flink's key). Off by default: https:// only.",
  } satisfies OptionDef<'boolean'>,
  headers: {
    key: 'user.artifacts.http-headers',
    type: 'map',
    sensitive: true,
    section: SECTION,
    check: headerProblems,
    description:
      "Headers added to every request to the jar URI's own origin (scheme, host and port), in Flink's map syntax " +
      '(Authorization:Bearer <token>,X-Api-Key:<key>). Never sent to another origin after a redirect.',
  } satisfies OptionDef<'map'>,
  headersHosts: {
    key: 'gateway.artifacts.http-headers.hosts',
    deprecatedKeys: ['user.artifacts.http-headers.hosts'],
    type: 'list',
    default: [],
    section: SECTION,
    description:
      'Where user.artifacts.http-headers may be sent: host or host:port entries separated by ";" (e.g. ' +
      'repo.example.com;artifactory.internal:8443). Headers go only to a jar URI whose host is listed — ' +
      'otherwise anyone who can submit a run could point a URI at their own server and collect them. ' +
      'With headers set and no hosts, headers are never sent (and start-up logs a warning).',
  } satisfies OptionDef<'list'>,
  maxRedirects: {
    key: 'gateway.artifacts.http.max-redirects',
    deprecatedKeys: ['user.artifacts.http.max-redirects'],
    type: 'int',
    default: 5,
    min: 0,
    max: 20,
    section: SECTION,
    description:
      'Redirects followed per request (301, 302, 303, 307, 308); every hop passes the restricted-host guard. One more is refused.',
  } satisfies OptionDef<'int'>,
  connectTimeout: {
    key: 'gateway.artifacts.http.connect-timeout',
    deprecatedKeys: ['user.artifacts.http.connect-timeout'],
    type: 'duration',
    default: 10_000,
    min: 1,
    section: SECTION,
    description: 'Time to establish a TCP (and TLS) connection to an HTTP(S) origin or to the proxy.',
  } satisfies OptionDef<'duration'>,
  readTimeout: {
    key: 'gateway.artifacts.http.read-timeout',
    deprecatedKeys: ['user.artifacts.http.read-timeout'],
    type: 'duration',
    default: 60_000,
    min: 1,
    section: SECTION,
    description:
      'Longest silence while waiting for response headers or body bytes. This is an inactivity timeout; ' +
      'user.artifacts.fetch-timeout bounds the whole download.',
  } satisfies OptionDef<'duration'>,
};

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Header names must be HTTP tokens and values must not break lines; problems name the header, never its value. */
function headerProblems(headers: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (!TOKEN.test(name)) problems.push(`'${name}' is not a valid header name`);
    else if (/[\r\n\0]/.test(value)) problems.push(`the value of '${name}' contains a line break or NUL`);
  }
  return problems;
}
