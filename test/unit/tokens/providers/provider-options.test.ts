import { randomBytes } from 'node:crypto';
import { OptionsRegistry } from '../../../../src/config/registry';
import { builtinTokenProviders as builtInTokenProviders } from '../../../../fs-plugins';
import { AZURE_BLOB_JOB_CONTAINERS_KEY, AzureBlobDelegationTokenProvider } from '../../../../fs-plugins/azure';
import { S3_JOB_ROLE_ARN_KEY, S3DelegationTokenProvider } from '../../../../fs-plugins/s3';
import { sessionName } from '../../../../fs-plugins/s3/token-provider';
import { OAUTH2_JOB_SCOPE_KEY, OAuth2DelegationTokenProvider } from '../../../../src/tokens/providers';
import { providerConfig as managerView } from '../../../../src/tokens/provider-config';
import type { DelegationTokenProvider } from '../../../../src/plugin-kit/token-spi';
import { failure, providerConfig } from './provider-kit';

// Option declarations and init/registerJob behaviour that needs no server.

const noop = { reobtainDelegationTokens: () => {} };
const AZ = 'security.delegation.token.provider.azure-blob.';
const S3 = 'security.delegation.token.provider.s3.';
const OA = 'security.delegation.token.provider.oauth2.';
const KEY = randomBytes(32).toString('base64');

function init<P extends DelegationTokenProvider>(p: P, name: string, settings: Record<string, string>): P {
  p.init(providerConfig(name, settings), noop);
  return p;
}

/** The error thrown by a sync call: code and message. */
function thrown(fn: () => unknown): { code?: string | undefined; message: string } {
  try {
    fn();
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  }
  throw new Error('did not throw');
}

test('every option is declared under its provider prefix, secrets are sensitive, and the registry accepts them all', () => {
  const registry = new OptionsRegistry(builtInTokenProviders.flatMap((p) => p.options));
  for (const p of builtInTokenProviders) {
    for (const def of p.options) expect(def.key.startsWith(`security.delegation.token.provider.${p.serviceName}.`)).toBe(true);
  }
  const sensitive = registry
    .all()
    .filter((d) => d.sensitive)
    .map((d) => d.key)
    .sort();
  expect(sensitive).toEqual([`${AZ}account-key`, `${OA}client-secret`, `${S3}access-key`, `${S3}secret-key`]);
  expect(new Set(builtInTokenProviders.map((p) => p.serviceName))).toEqual(new Set(['azure-blob', 's3', 'oauth2']));
  expect(registry.toMarkdown()).toContain('## Delegation tokens: oauth2');
});

test('unconfigured providers are inactive; a job asking them for something is rejected, naming the options to set', () => {
  const az = init(new AzureBlobDelegationTokenProvider(), 'azure-blob', {});
  const s3 = init(new S3DelegationTokenProvider(), 's3', {});
  const oa = init(new OAuth2DelegationTokenProvider(), 'oauth2', {});
  for (const p of [az, s3, oa]) {
    p.registerJob!('j', {});
    expect(p.delegationTokensRequired()).toBe(false);
  }
  expect(thrown(() => az.registerJob('j', { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'c' })).message).toContain(
    `set ${AZ}account-name and ${AZ}account-key`,
  );
  expect(thrown(() => s3.registerJob('j', { [S3_JOB_ROLE_ARN_KEY]: 'arn:aws:iam::1:role/r' })).message).toContain(
    `set ${S3}access-key and ${S3}secret-key`,
  );
  expect(thrown(() => oa.registerJob('j', { [OAUTH2_JOB_SCOPE_KEY]: 'x' })).message).toContain(
    `set ${OA}token-endpoint, ${OA}client-id and ${OA}client-secret`,
  );
});

test('a half-configured provider fails init with GW_CONFIG_INVALID naming the missing keys', () => {
  const e = thrown(() => init(new S3DelegationTokenProvider(), 's3', { [`${S3}access-key`]: 'AKIAEXAMPLE' }));
  expect(e.code).toBe('GW_CONFIG_INVALID');
  expect(e.message).toContain(`${S3}secret-key (from not set): must be set together with ${S3}access-key`);
  expect(e.message).not.toContain('AKIAEXAMPLE');
  const o = thrown(() => init(new OAuth2DelegationTokenProvider(), 'oauth2', { [`${OA}client-secret`]: 'shh-secret-value' }));
  expect(o.message).toContain(`${OA}token-endpoint`);
  expect(o.message).toContain(`${OA}client-id`);
  expect(o.message).not.toContain('shh-secret-value');
});

test('bad values are all reported at once, and a sensitive value is never echoed', () => {
  const e = thrown(() =>
    init(new AzureBlobDelegationTokenProvider(), 'azure-blob', {
      [`${AZ}account-name`]: 'acct',
      [`${AZ}account-key`]: KEY,
      [`${AZ}sas-lifetime`]: '5 s',
      [`${AZ}allowed-containers`]: 'a',
    }),
  );
  expect(e.message).toContain(`${AZ}sas-lifetime (from configuration): 5 s is below the minimum 60000`);
  const two = thrown(() =>
    init(new S3DelegationTokenProvider(), 's3', {
      [`${S3}access-key`]: 'a',
      [`${S3}secret-key`]: 'b',
      [`${S3}duration`]: '1 min',
      [`${S3}timeout`]: 'soon',
    }),
  );
  expect(two.message).toContain('(2 problems)');
  expect(two.message).toContain(`${S3}duration (from configuration): 1 min is below the minimum 900000`);
  expect(two.message).toContain(`${S3}timeout (from configuration): 'soon' is not a duration`);
  const badKey = thrown(() =>
    init(new AzureBlobDelegationTokenProvider(), 'azure-blob', { [`${AZ}account-name`]: 'acct', [`${AZ}account-key`]: 'not base64 !!' }),
  );
  expect(badKey.message).toContain(`${AZ}account-key (from configuration): is not a base64 account key (value not shown)`);
  expect(badKey.message).not.toContain('not base64 !!');
  const perms = thrown(() =>
    init(new AzureBlobDelegationTokenProvider(), 'azure-blob', {
      [`${AZ}account-name`]: 'acct',
      [`${AZ}account-key`]: KEY,
      [`${AZ}permissions`]: 'rq',
    }),
  );
  expect(perms.message).toContain(`${AZ}permissions (from configuration): Invalid permission q`);
});

test('auth: user-delegation needs an account name and https, refuses an account key, and caps the lifetime at 7 days', () => {
  const e = thrown(() =>
    init(new AzureBlobDelegationTokenProvider(), 'azure-blob', {
      [`${AZ}auth`]: 'user-delegation',
      [`${AZ}account-key`]: KEY,
      [`${AZ}sas-lifetime`]: '8 d',
    }),
  );
  expect(e.code).toBe('GW_CONFIG_INVALID');
  expect(e.message).toContain('(3 problems)');
  expect(e.message).toContain(`${AZ}account-name (from not set): is required with ${AZ}auth: user-delegation`);
  expect(e.message).toContain(`${AZ}account-key (from configuration): is not used with ${AZ}auth: user-delegation; remove it`);
  expect(e.message).toContain(`${AZ}sas-lifetime (from configuration): is above 7 days`);
  expect(e.message).not.toContain(KEY);
  const http = thrown(() =>
    init(new AzureBlobDelegationTokenProvider(), 'azure-blob', {
      [`${AZ}auth`]: 'user-delegation',
      [`${AZ}account-name`]: 'acct',
      [`${AZ}endpoint`]: 'http://127.0.0.1:10000/acct',
    }),
  );
  expect(http.message).toContain(`${AZ}endpoint (from configuration): must be https with user-delegation`);
  const bad = thrown(() => init(new AzureBlobDelegationTokenProvider(), 'azure-blob', { [`${AZ}auth`]: 'oauth' }));
  expect(bad.message).toContain(`${AZ}auth (from configuration): 'oauth' is not one of account-key, user-delegation`);
});

test('endpoints must be https, except for loopback hosts', () => {
  const base = { [`${OA}client-id`]: 'id', [`${OA}client-secret`]: 'secret' };
  const e = thrown(() =>
    init(new OAuth2DelegationTokenProvider(), 'oauth2', { ...base, [`${OA}token-endpoint`]: 'http://idp.example.com/token' }),
  );
  expect(e.message).toContain('must use https:// (plain http is allowed only for loopback hosts, not idp.example.com)');
  const userinfo = thrown(() =>
    init(new OAuth2DelegationTokenProvider(), 'oauth2', { ...base, [`${OA}token-endpoint`]: 'https://u:p@idp.example.com/token' }),
  );
  expect(userinfo.message).toContain('must not carry user info');
  expect(userinfo.message).not.toContain('u:p');
  for (const ok of ['https://idp.example.com/token', 'http://127.0.0.1:8080/token', 'http://localhost/token']) {
    expect(() => init(new OAuth2DelegationTokenProvider(), 'oauth2', { ...base, [`${OA}token-endpoint`]: ok })).not.toThrow();
  }
  const s3 = thrown(() =>
    init(new S3DelegationTokenProvider(), 's3', {
      [`${S3}access-key`]: 'a',
      [`${S3}secret-key`]: 'b',
      [`${S3}endpoint`]: 'http://minio:9000',
    }),
  );
  expect(s3.message).toContain(`${S3}endpoint`);
});

test('re-registration with the same request does not re-obtain; a changed request does; a refused change keeps the old one', async () => {
  let calls = 0;
  const p = new AzureBlobDelegationTokenProvider({ now: () => Date.parse('2030-01-01T00:00:00Z') });
  p.init(providerConfig('azure-blob', { [`${AZ}account-name`]: 'acct', [`${AZ}account-key`]: KEY, [`${AZ}allowed-containers`]: 'a;b' }), {
    reobtainDelegationTokens: () => void calls++,
  });
  p.registerJob('j', { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'a;b' });
  p.registerJob('j', { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'b, a' });
  expect(calls).toBe(1);
  p.registerJob('j', { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'a' });
  expect(calls).toBe(2);
  expect(await failure(() => p.registerJob('j', { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'a;z' }))).toContain("container 'z'");
  const tokens = JSON.parse(new TextDecoder().decode((await p.obtainDelegationTokens()).tokens));
  expect(Object.keys(tokens.jobs.j)).toEqual(['a']);
  expect(tokens.blobEndpoint).toBe('https://acct.blob.core.windows.net');
  // https endpoint → https-only SAS
  expect(tokens.jobs.j.a.sas).toContain('spr=https&');
  expect(tokens.jobs.j.a.expiresOn).toBe('2030-01-01T01:00:00.000Z');
  p.unregisterJob('j');
  p.unregisterJob('j');
  expect(p.delegationTokensRequired()).toBe(false);
  p.close();
  expect(await failure(() => p.obtainDelegationTokens())).toBe('the azure-blob provider is closed');
});

test('the STS session name names the job within AWS limits', () => {
  expect(sessionName('0123456789abcdef0123456789abcdef')).toBe('flink-0123456789abcdef0123456789abcdef');
  expect(sessionName('a b/c'.repeat(30))).toMatch(/^flink-a_b_ca_b_c[\w+=,.@-]*$/);
  expect(sessionName('a b/c'.repeat(30)).length).toBe(64);
});

test("through the manager's config view (registry-parsed values and defaults, re-formatted) the providers read what was set", async () => {
  const raw = new Map(
    Object.entries({
      [`${OA}token-endpoint`]: 'https://idp.example.com/token',
      [`${OA}client-id`]: 'id',
      [`${OA}client-secret`]: 'secret',
      [`${OA}allowed-scopes`]: 'a;b',
      [`${AZ}account-name`]: 'acct',
      [`${AZ}account-key`]: KEY,
      [`${AZ}allowed-containers`]: 'c1;c2',
      [`${AZ}sas-lifetime`]: '90 min',
    }).map(([k, v]) => [k, { value: v, source: 'test' }]),
  );
  const config = new OptionsRegistry(builtInTokenProviders.flatMap((p) => p.options)).resolve(raw);
  const az = new AzureBlobDelegationTokenProvider({ now: () => 0 });
  az.init(managerView(config, 'azure-blob'), noop);
  az.registerJob('j', { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'c1;c2' });
  expect((await az.obtainDelegationTokens()).validUntil).toBe(90 * 60_000);
  const oa = new OAuth2DelegationTokenProvider();
  oa.init(managerView(config, 'oauth2'), noop);
  expect(() => oa.registerJob('j', { [OAUTH2_JOB_SCOPE_KEY]: 'a b' })).not.toThrow();
  expect(oa.delegationTokensRequired()).toBe(true);
  const s3 = new S3DelegationTokenProvider();
  s3.init(managerView(config, 's3'), noop);
  expect(s3.delegationTokensRequired()).toBe(false);
  await Promise.all([az.close(), oa.close(), s3.close()]);
});
