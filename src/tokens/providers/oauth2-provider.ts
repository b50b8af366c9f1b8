import { Agent } from 'undici';
import { trustedCa } from '../../net/guarded-connector';
import type { ConfigRule } from '../../config/registry';
import type { OptionDef } from '../../config/types';
import { JobRefusedError } from '../../plugin-kit/registration-error';
import type { JobConfiguration, JobContext, ObtainedDelegationTokens, ProviderConfig } from '../../plugin-kit/token-spi';
import {
  JOB_REQUEST_PREFIX,
  JobScopedProvider,
  PROVIDER_TIMEOUT_DEFAULT_MS,
  allOrNone,
  allOrNoneRule,
  httpsUnlessLoopback,
  displayUrl,
  earliest,
  jobValue,
  obtainedTokens,
  parseEndpoint,
  providerKey,
  providerSection,
  providerTimeoutOption,
  readLimited,
  readProviderOptions,
  scrub,
  type BuiltInTokenProvider,
  type ProviderDeps,
  PrincipalAllowList,
} from '../../plugin-kit/provider-support';

const NAME = 'oauth2';
const SECTION = providerSection(NAME);

/** The job configuration key with which a job asks for its own OAuth scope (space-separated scope tokens). */
export const OAUTH2_JOB_SCOPE_KEY = `${JOB_REQUEST_PREFIX}.${NAME}.scope`;

/** The provider's options, under `security.delegation.token.provider.oauth2.*`. */
export const oauth2ProviderOptionDefs = {
  tokenEndpoint: {
    key: providerKey(NAME, 'token-endpoint'),
    type: 'url',
    check: httpsUnlessLoopback,
    section: SECTION,
    description:
      'Token endpoint of the authorization server (https; plain http only for loopback). With `client-id` and `client-secret` it ' +
      'activates the provider.',
  },
  clientId: {
    key: providerKey(NAME, 'client-id'),
    type: 'string',
    section: SECTION,
    description: 'Client id of the gateway at the authorization server (client-credentials grant, RFC 6749 §4.4).',
  },
  clientSecret: {
    key: providerKey(NAME, 'client-secret'),
    type: 'string',
    sensitive: true,
    section: SECTION,
    description: 'Client secret, sent with HTTP Basic authentication (RFC 6749 §2.3.1). Never leaves the gateway otherwise.',
  },
  scope: {
    key: providerKey(NAME, 'scope'),
    type: 'string',
    check: (scope: string) =>
      scopeTokens(scope)
        .filter((t) => !SCOPE_TOKEN.test(t))
        .map((t) => `'${t}' is not a valid scope token`),
    section: SECTION,
    description: "Scope (space-separated) requested for jobs that do not ask for one. Unset = no `scope` parameter (the server's default).",
  },
  allowedScopes: {
    key: providerKey(NAME, 'allowed-scopes'),
    type: 'list',
    default: [],
    section: SECTION,
    description: `Scope tokens a job may ask for in \`${OAUTH2_JOB_SCOPE_KEY}\` (\`;\`-separated). A job asking for any other scope token is rejected. An entry may be tied to one principal, \`token:<name>=<item>\` or \`cert:<CN>=<item>\`: then only that submitter may ask for it; entries without a principal are for every submitter.`,
  },
  defaultTtl: {
    key: providerKey(NAME, 'default-ttl'),
    type: 'duration',
    default: 3_600_000,
    min: 1000,
    section: SECTION,
    description: 'Lifetime assumed when the token response has no `expires_in`, so that the token is still renewed.',
  },
  timeout: providerTimeoutOption(NAME, 'one token request'),
} satisfies Record<string, OptionDef>;

/** The same options as the typed list the options registry takes. */
export const oauth2ProviderOptions: OptionDef[] = Object.values(oauth2ProviderOptionDefs);

/** The client is configured as a whole or not at all. */
export const oauth2ProviderRules: readonly ConfigRule[] = [
  allOrNoneRule(
    [oauth2ProviderOptionDefs.tokenEndpoint, oauth2ProviderOptionDefs.clientId, oauth2ProviderOptionDefs.clientSecret],
    'the OAuth client',
  ),
];

/** One job's entry in the payload. */
export interface OAuth2JobToken {
  accessToken: string;
  /** As the server sent it, usually `Bearer`. */
  tokenType: string;
  /** ISO 8601: the time the response arrived plus `expires_in` (or the default TTL). */
  expiresAt: string;
  /** Granted scope: the response's `scope`, else the requested one; absent when neither. */
  scope?: string;
}

/** What `obtainDelegationTokens()` returns (UTF-8 JSON); receivers parse this. */
export interface OAuth2Tokens {
  version: 1;
  jobs: Record<string, OAuth2JobToken>;
}

interface Settings {
  endpoint: URL;
  clientId: string;
  clientSecret: string;
  defaultScope: string | undefined;
  allowed: PrincipalAllowList;
  defaultTtlMs: number;
  timeoutMs: number;
  dispatcher: Agent;
}

/** A job's effective scope; '' = no scope parameter. */
interface JobState {
  scope: string;
}

const MAX_RESPONSE_BYTES = 1024 * 1024;
// RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * Per-job OAuth 2.0 access tokens from the client-credentials grant (RFC 6749 §4.4): a form POST
 * `grant_type=client_credentials[&scope=…]` to `token-endpoint`, the client authenticated with
 * HTTP Basic.
 *
 * - Every registered job gets a token: with the scope it asks for in
 *   `security.delegation.job.oauth2.scope` (each scope token must be on `allowed-scopes`, otherwise
 *   `registerJob` throws and the job is rejected), else with the configured `scope`. Jobs with the
 *   same scope share one request per cycle; every cycle fetches new tokens (there is no refresh
 *   token in this grant, RFC 6749 §4.4.3).
 * - `validUntil` = the earliest of (arrival time + `expires_in`), with `default-ttl` when the server
 *   sends no `expires_in`.
 * - A non-2xx answer fails the cycle with the HTTP status and the server's `error` code; the message
 *   never contains the client secret or a token.
 * - `delegationTokensRequired()` is true while at least one job is registered and the client is configured.
 * - Payload: {@link OAuth2Tokens}.
 * - Without `token-endpoint`, `client-id` and `client-secret` the provider stays inactive; a job that
 *   asks for a scope is then rejected, naming the options to set.
 */
export class OAuth2DelegationTokenProvider extends JobScopedProvider<JobState, Settings> {
  readonly jobRequestKeys = [OAUTH2_JOB_SCOPE_KEY];
  private readonly controller = new AbortController();

  constructor(deps: ProviderDeps = {}) {
    super(NAME, deps, (a, b) => a.scope === b.scope, 'job registered for OAuth2 access tokens');
  }

  protected configure(config: ProviderConfig): Settings | undefined {
    const d = oauth2ProviderOptionDefs;
    const o = readProviderOptions(NAME, d, config, oauth2ProviderRules);
    if (!allOrNone([o.tokenEndpoint, o.clientId, o.clientSecret])) {
      this.log?.debug('inactive: token-endpoint, client-id and client-secret are not set');
      return undefined;
    }
    const defaultScope = o.scope !== undefined && o.scope.trim() !== '' ? scopeTokens(o.scope).join(' ') : undefined;
    return {
      endpoint: parseEndpoint(d.tokenEndpoint.key, o.tokenEndpoint!),
      clientId: o.clientId!,
      clientSecret: o.clientSecret!,
      defaultScope,
      allowed: new PrincipalAllowList(o.allowedScopes ?? []),
      defaultTtlMs: o.defaultTtl ?? 3_600_000,
      timeoutMs: o.timeout ?? PROVIDER_TIMEOUT_DEFAULT_MS,
      dispatcher: new Agent({
        connections: 4,
        keepAliveTimeout: 10_000,
        ...(this.ca === undefined ? {} : { connect: { ca: trustedCa(this.ca) } }),
      }),
    };
  }

  /** The requested scope (each token on the allow-list), else the default scope. */
  protected stateFor(jobConfiguration: JobConfiguration, context: JobContext, s: Settings | undefined): JobState | undefined {
    const requested = jobValue(jobConfiguration, OAUTH2_JOB_SCOPE_KEY);
    if (s === undefined) {
      if (requested === undefined) return undefined;
      throw new JobRefusedError(
        `the job asks for an OAuth scope (${OAUTH2_JOB_SCOPE_KEY}) but the gateway has no OAuth client configured ` +
          `(set ${oauth2ProviderOptionDefs.tokenEndpoint.key}, ${oauth2ProviderOptionDefs.clientId.key} and ` +
          `${oauth2ProviderOptionDefs.clientSecret.key})`,
      );
    }
    if (requested === undefined) return { scope: s.defaultScope ?? '' };
    const tokens = scopeTokens(requested);
    const refused = tokens.filter((t) => !s.allowed.allows(context.principal, t));
    if (refused.length > 0) {
      throw new JobRefusedError(
        `the OAuth scope ${refused.map((t) => `'${t}'`).join(', ')} (${OAUTH2_JOB_SCOPE_KEY}) is not allowed for jobs; an ` +
          `administrator can add it to ${oauth2ProviderOptionDefs.allowedScopes.key}`,
      );
    }
    return { scope: tokens.join(' ') };
  }

  protected describe(state: JobState): Record<string, unknown> {
    return { scope: state.scope };
  }

  /** One token per distinct scope, shared by the jobs that asked for it. */
  protected async obtainFor(s: Settings, snapshot: ReadonlyMap<string, JobState>): Promise<ObtainedDelegationTokens> {
    const byScope = new Map<string, Promise<OAuth2JobToken>>();
    for (const { scope } of snapshot.values()) if (!byScope.has(scope)) byScope.set(scope, this.fetchToken(s, scope));
    const entries = await Promise.all([...snapshot].map(async ([jobId, { scope }]) => [jobId, await byScope.get(scope)!] as const));
    // A job unregistered while the server was answering gets nothing.
    const jobs = Object.fromEntries(entries.filter(([jobId]) => this.jobs.has(jobId)));
    const payload: OAuth2Tokens = { version: 1, jobs };
    const validUntil = earliest(Object.values(jobs).map((t) => Date.parse(t.expiresAt)));
    return obtainedTokens(payload, validUntil);
  }

  protected override async release(): Promise<void> {
    this.controller.abort(new Error('the oauth2 provider was closed'));
    await this.settings?.dispatcher.close().catch(() => undefined);
  }

  /** One client-credentials request. Errors name the endpoint and status, never the secret. */
  private async fetchToken(s: Settings, scope: string): Promise<OAuth2JobToken> {
    const where = displayUrl(s.endpoint);
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (scope !== '') form.set('scope', scope);
    const basic = Buffer.from(`${formEncode(s.clientId)}:${formEncode(s.clientSecret)}`, 'utf8').toString('base64');
    let status: number;
    let text: string;
    try {
      const res = await s.dispatcher.request({
        origin: s.endpoint.origin,
        path: `${s.endpoint.pathname}${s.endpoint.search}`,
        method: 'POST',
        headers: {
          authorization: `Basic ${basic}`,
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: form.toString(),
        signal: AbortSignal.any([this.controller.signal, AbortSignal.timeout(s.timeoutMs)]),
      });
      status = res.statusCode;
      text = await readLimited(res.body, MAX_RESPONSE_BYTES);
    } catch (err) {
      const e = err as Error;
      const reason = e.name === 'TimeoutError' ? `no answer within ${s.timeoutMs} ms` : scrub(e.message, [s.clientSecret]);
      throw new Error(`OAuth2 token request to ${where} failed: ${reason}`);
    }
    const receivedAt = this.now();
    const body = parseJsonObject(text);
    if (status < 200 || status >= 300) {
      // RFC 6749 §5.2: `error` is an ASCII code; the description is free text, so it is shortened and scrubbed.
      const code = typeof body?.['error'] === 'string' && /^[\x20-\x7E]{1,64}$/.test(body['error']) ? body['error'] : undefined;
      const desc = typeof body?.['error_description'] === 'string' ? body['error_description'].slice(0, 200) : undefined;
      const detail = code ? ` (${code}${desc ? `: ${desc}` : ''})` : '';
      const hint = status === 401 ? '; check the client id and secret' : '';
      throw new Error(scrub(`OAuth2 token endpoint ${where} answered HTTP ${status}${detail}${hint}`, [s.clientSecret]));
    }
    const accessToken = body?.['access_token'];
    if (typeof accessToken !== 'string' || accessToken === '') {
      throw new Error(`OAuth2 token endpoint ${where} answered HTTP ${status} without an access_token`);
    }
    const tokenType = typeof body?.['token_type'] === 'string' && body['token_type'] !== '' ? body['token_type'] : 'Bearer';
    const ttlMs = expiresInMs(body?.['expires_in'], s.defaultTtlMs, where);
    const granted = typeof body?.['scope'] === 'string' && body['scope'] !== '' ? body['scope'] : scope;
    return {
      accessToken,
      tokenType,
      expiresAt: new Date(receivedAt + ttlMs).toISOString(),
      ...(granted === '' ? {} : { scope: granted }),
    };
  }
}

/** `expires_in` (seconds, a number or a numeric string), else the default TTL. */
function expiresInMs(value: unknown, defaultTtlMs: number, where: string): number {
  if (value === undefined || value === null) return defaultTtlMs;
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isFinite(n) || n <= 0) throw new Error(`OAuth2 token endpoint ${where} sent an invalid expires_in`);
  return n * 1000;
}

/** Space-separated scope → unique tokens, sorted (so equal scopes share one request). */
function scopeTokens(scope: string): string[] {
  return [...new Set(scope.split(/\s+/).filter(Boolean))].sort();
}

/** RFC 6749 §2.3.1: client id and secret are form-urlencoded before Basic encoding. */
function formEncode(text: string): string {
  return new URLSearchParams({ x: text }).toString().slice(2);
}

function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The `oauth2` provider for the composition root. */
export const oauth2TokenProvider: BuiltInTokenProvider = {
  serviceName: NAME,
  options: oauth2ProviderOptions,
  rules: oauth2ProviderRules,
  create: (deps) => new OAuth2DelegationTokenProvider(deps),
};
