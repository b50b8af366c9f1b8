import type { IncomingMessage, ServerResponse } from 'node:http';
import { OAUTH2_JOB_SCOPE_KEY, OAuth2DelegationTokenProvider, type OAuth2Tokens } from '../../../src/tokens/providers/oauth2-provider';
import { startOrigin, type Origin } from '../../helpers/origin';
import { decode, failure, providerConfig, recordingCallback } from '../../unit/tokens/providers/provider-kit';

// The oauth2 provider against a real node:http token endpoint that implements the client-credentials
// grant: it checks HTTP Basic client authentication (RFC 6749 §2.3.1, form-encoded id and secret),
// the grant type and the content type, and issues a new token value on every request.

const CLIENT_ID = 'flink-gateway';
// Characters that RFC 6749 §2.3.1 form-encodes before the Basic encoding.
const CLIENT_SECRET = 's3cr:t+/=%&ü-0123456789';
const T0 = Date.parse('2030-01-01T00:00:00Z');
const JOB_A = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const JOB_B = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';

interface Issued {
  scope: string | null;
  grantType: string | null;
}

/** What the endpoint does next: answer normally (with or without expires_in), or hang. */
let mode: 'normal' | 'no-expires-in' | 'hang' | 'no-token' | 'held' = 'normal';
/** In 'held' mode the endpoint answers only once this is called. */
let release: () => void = () => {};
let issued: Issued[] = [];
let origin: Origin;
let tokenUrl: string;

function formDecode(s: string): string {
  return new URLSearchParams(`x=${s}`).get('x') ?? '';
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

async function tokenEndpoint(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  if (req.method !== 'POST' || req.url !== '/oauth/token') return send(res, 404, { error: 'not_found' });
  if (!req.headers['content-type']?.startsWith('application/x-www-form-urlencoded')) return send(res, 400, { error: 'invalid_request' });
  const auth = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
  const decoded = auth ? Buffer.from(auth[1]!, 'base64').toString('utf8') : '';
  const colon = decoded.indexOf(':');
  const id = formDecode(decoded.slice(0, colon));
  const secret = formDecode(decoded.slice(colon + 1));
  if (colon < 0 || id !== CLIENT_ID || secret !== CLIENT_SECRET) {
    res.setHeader('www-authenticate', 'Basic realm="token"');
    // A careless server that echoes what it was sent: the provider must not pass that on.
    return send(res, 401, { error: 'invalid_client', error_description: `unknown client ${id} with secret ${secret}` });
  }
  const form = new URLSearchParams(raw);
  if (form.get('grant_type') !== 'client_credentials') return send(res, 400, { error: 'unsupported_grant_type' });
  issued.push({ scope: form.get('scope'), grantType: form.get('grant_type') });
  if (mode === 'hang') return; // never answers
  if (mode === 'held') await new Promise<void>((r) => (release = r));
  if (mode === 'no-token') return send(res, 200, { token_type: 'Bearer' });
  const body: Record<string, unknown> = { access_token: `tok-${issued.length}`, token_type: 'Bearer' };
  if (mode === 'normal' || mode === 'held') body['expires_in'] = 300;
  if (form.get('scope')) body['scope'] = form.get('scope');
  send(res, 200, body);
}

beforeAll(async () => {
  origin = await startOrigin((req, res) => {
    tokenEndpoint(req, res).catch((err: unknown) => send(res, 500, { error: String(err) }));
  });
  tokenUrl = `${origin.url}/oauth/token`;
});

afterAll(async () => {
  await origin?.close();
});

beforeEach(() => {
  mode = 'normal';
  issued = [];
});

function settings(extra: Record<string, string> = {}): Record<string, string> {
  return {
    'security.delegation.token.provider.oauth2.token-endpoint': tokenUrl,
    'security.delegation.token.provider.oauth2.client-id': CLIENT_ID,
    'security.delegation.token.provider.oauth2.client-secret': CLIENT_SECRET,
    'security.delegation.token.provider.oauth2.scope': 'jobs.read',
    'security.delegation.token.provider.oauth2.allowed-scopes': 'events.read;events.write',
    ...extra,
  };
}

function provider(extra?: Record<string, string>): OAuth2DelegationTokenProvider {
  const p = new OAuth2DelegationTokenProvider({ now: () => T0 });
  p.init(providerConfig('oauth2', settings(extra)), { reobtainDelegationTokens: () => {} });
  return p;
}

test('the token is fetched with Basic client auth, expires_in sets validUntil, and the next obtain renews it', async () => {
  const p = new OAuth2DelegationTokenProvider({ now: () => T0 });
  const cb = recordingCallback(() => p);
  p.init(providerConfig('oauth2', settings()), cb);
  expect(p.delegationTokensRequired()).toBe(false);
  p.registerJob(JOB_A, {});
  p.registerJob(JOB_A, {}); // idempotent
  expect(cb.requiredAtCall).toEqual([true]);

  const first = await p.obtainDelegationTokens();
  expect(first.validUntil).toBe(T0 + 300_000);
  const t1 = decode<OAuth2Tokens>(first.tokens);
  expect(t1).toEqual({
    version: 1,
    jobs: { [JOB_A]: { accessToken: 'tok-1', tokenType: 'Bearer', expiresAt: new Date(T0 + 300_000).toISOString(), scope: 'jobs.read' } },
  });
  expect(issued).toEqual([{ grantType: 'client_credentials', scope: 'jobs.read' }]);

  const second = decode<OAuth2Tokens>((await p.obtainDelegationTokens()).tokens);
  expect(second.jobs[JOB_A]!.accessToken).toBe('tok-2');
  await p.close();
});

test('without expires_in the configured default TTL applies (1 h when not configured)', async () => {
  mode = 'no-expires-in';
  const configured = provider({ 'security.delegation.token.provider.oauth2.default-ttl': '10 min' });
  configured.registerJob(JOB_A, {});
  expect((await configured.obtainDelegationTokens()).validUntil).toBe(T0 + 600_000);
  await configured.close();

  const defaulted = provider();
  defaulted.registerJob(JOB_A, {});
  expect((await defaulted.obtainDelegationTokens()).validUntil).toBe(T0 + 3_600_000);
  await defaulted.close();
});

test('a 401 from the endpoint is a clear error without the client secret, even when the server echoes it', async () => {
  const wrong = 'wrong-secret-that-must-not-leak';
  const p = provider({ 'security.delegation.token.provider.oauth2.client-secret': wrong });
  p.registerJob(JOB_A, {});
  const message = await failure(() => p.obtainDelegationTokens());
  expect(message).toMatch(
    new RegExp(`^OAuth2 token endpoint ${tokenUrl} answered HTTP 401 \\(invalid_client: .*\\); check the client id and secret$`),
  );
  expect(message).not.toContain(wrong);
  expect(message).toContain('[redacted]');
  await p.close();
});

test('a 200 without access_token is refused clearly', async () => {
  mode = 'no-token';
  const p = provider();
  p.registerJob(JOB_A, {});
  expect(await failure(() => p.obtainDelegationTokens())).toBe(
    `OAuth2 token endpoint ${tokenUrl} answered HTTP 200 without an access_token`,
  );
  await p.close();
});

test('a job scope must be on the allow-list; allowed scopes are requested, and equal scopes share one request', async () => {
  const p = provider();
  const message = await failure(() => p.registerJob(JOB_A, { [OAUTH2_JOB_SCOPE_KEY]: 'events.read admin' }));
  expect(message).toBe(
    `the OAuth scope 'admin' (${OAUTH2_JOB_SCOPE_KEY}) is not allowed for jobs; an administrator can add it to ` +
      'security.delegation.token.provider.oauth2.allowed-scopes',
  );
  expect(p.delegationTokensRequired()).toBe(false);

  p.registerJob(JOB_A, { [OAUTH2_JOB_SCOPE_KEY]: 'events.write events.read' });
  p.registerJob(JOB_B, { [OAUTH2_JOB_SCOPE_KEY]: 'events.read  events.write' });
  const tokens = decode<OAuth2Tokens>((await p.obtainDelegationTokens()).tokens);
  expect(issued).toEqual([{ grantType: 'client_credentials', scope: 'events.read events.write' }]);
  expect(tokens.jobs[JOB_A]!.accessToken).toBe('tok-1');
  expect(tokens.jobs[JOB_B]!.accessToken).toBe('tok-1');
  expect(tokens.jobs[JOB_A]!.scope).toBe('events.read events.write');
  await p.close();
});

test('close() aborts a token request in flight', async () => {
  mode = 'hang';
  const p = provider();
  p.registerJob(JOB_A, {});
  const pending = failure(() => p.obtainDelegationTokens());
  while (issued.length === 0) await new Promise((r) => setImmediate(r));
  await p.close();
  expect(await pending).toBe(`OAuth2 token request to ${tokenUrl} failed: the oauth2 provider was closed`);
});

test('a job unregistered while the token request is in flight gets no token from that cycle', async () => {
  mode = 'held';
  const p = provider();
  p.registerJob(JOB_A, {});
  p.registerJob(JOB_B, {});
  const pending = p.obtainDelegationTokens();
  while (issued.length === 0) await new Promise((r) => setImmediate(r));
  p.unregisterJob(JOB_B);
  release();
  const tokens = decode<OAuth2Tokens>((await pending).tokens);
  expect(Object.keys(tokens.jobs)).toEqual([JOB_A]);
  await p.close();
});
