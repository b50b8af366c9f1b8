import { randomBytes } from 'node:crypto';
import { Agent as HttpsAgent } from 'node:https';
import type { TokenCredential } from '@azure/identity';
import {
  AnonymousCredential,
  BlobServiceClient,
  ContainerClient,
  RestError,
  StorageSharedKeyCredential,
  type StoragePipelineOptions,
} from '@azure/storage-blob';
import {
  AZURE_BLOB_JOB_CONTAINERS_KEY,
  AzureBlobDelegationTokenProvider,
  type AzureBlobTokens,
} from '../../../fs-plugins/azure/token-provider';
import { startAzurite, uploadBlob, type Azurite, type AzuriteAccount } from '../../servers/azurite';
import { fakeEntraCredential, startAzuriteOAuth, type AzuriteOAuth } from './azurite-oauth';
import { decode, failure, providerConfig, recordingCallback } from '../../unit/tokens/providers/provider-kit';

// The azure-blob provider against a real Azurite: the per-job container SAS it signs with the
// account key must read the allowed container, and Azurite must refuse it on another container,
// for a write, and once it has expired (an injected clock signs it two hours in the past).
// `auth: user-delegation` runs against a second Azurite with HTTPS and `--oauth basic` (what Get User
// Delegation Key needs); its bearer tokens are unsigned look-alikes, which that mode accepts.

const ACCOUNT: AzuriteAccount = { name: 'tokacct', key: randomBytes(64).toString('base64') };
const JOB = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const HOUR = 3_600_000;

let azurite: Azurite;

beforeAll(async () => {
  azurite = await startAzurite({ accounts: [ACCOUNT] });
  await uploadBlob(azurite, ACCOUNT, 'allowed', 'data/part-0.csv', Buffer.from('allowed,1\n'));
  await uploadBlob(azurite, ACCOUNT, 'also-allowed', 'x.txt', Buffer.from('second container'));
  await uploadBlob(azurite, ACCOUNT, 'private', 'secret.txt', Buffer.from('not for jobs'));
}, 300_000);

afterAll(async () => {
  await azurite?.stop();
});

function settings(extra: Record<string, string> = {}): Record<string, string> {
  return {
    'security.delegation.token.provider.azure-blob.account-name': ACCOUNT.name,
    'security.delegation.token.provider.azure-blob.account-key': ACCOUNT.key,
    'security.delegation.token.provider.azure-blob.endpoint': azurite.blobUrl(ACCOUNT.name),
    'security.delegation.token.provider.azure-blob.allowed-containers': 'allowed;also-allowed',
    ...extra,
  };
}

function provider(now?: () => number, extra?: Record<string, string>): AzureBlobDelegationTokenProvider {
  const p = new AzureBlobDelegationTokenProvider(now ? { now } : {});
  p.init(providerConfig('azure-blob', settings(extra)), { reobtainDelegationTokens: () => {} });
  return p;
}

/** A client for `container` authorised only by the SAS the provider issued. */
function sasClient(tokens: AzureBlobTokens, container: string, sas: string): ContainerClient {
  return new ContainerClient(`${tokens.blobEndpoint}/${container}?${sas}`, new AnonymousCredential(), { retryOptions: { maxTries: 1 } });
}

async function read(client: ContainerClient, blob: string): Promise<string> {
  return (await client.getBlobClient(blob).downloadToBuffer()).toString('utf8');
}

async function status(p: Promise<unknown>): Promise<number | 'ok'> {
  return p.then(
    () => 'ok' as const,
    (e: unknown) => {
      if (e instanceof RestError || (e as { statusCode?: number }).statusCode !== undefined) return (e as RestError).statusCode ?? -1;
      throw e;
    },
  );
}

test('a job SAS reads its container, and Azurite refuses it on another container and for a write', async () => {
  const p = new AzureBlobDelegationTokenProvider();
  const cb = recordingCallback(() => p);
  p.init(providerConfig('azure-blob', settings()), cb);
  expect(p.delegationTokensRequired()).toBe(false);
  p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'allowed;also-allowed' });
  // The job was recorded before the re-obtain was requested (SPI ordering rule).
  expect(cb.requiredAtCall).toEqual([true]);
  const before = Date.now();
  const obtained = await p.obtainDelegationTokens();
  const after = Date.now();
  const tokens = decode<AzureBlobTokens>(obtained.tokens);
  expect(tokens.version).toBe(1);
  expect(tokens.accountName).toBe(ACCOUNT.name);
  expect(Object.keys(tokens.jobs[JOB]!).sort()).toEqual(['allowed', 'also-allowed']);
  const entry = tokens.jobs[JOB]!['allowed']!;
  expect(obtained.validUntil).toBe(Date.parse(entry.expiresOn));
  // Default lifetime 1 h (whole seconds in the SAS, so compare loosely).
  expect(obtained.validUntil! - before).toBeGreaterThan(HOUR - 5_000);
  // Bracketed by the call (before … after), so a slow call on a busy machine does not count.
  expect(obtained.validUntil! - after).toBeLessThan(HOUR + 5_000);
  expect(entry.sas).toContain('sr=c');
  expect(entry.sas).toContain('sp=r');
  expect(entry.sas).not.toContain(ACCOUNT.key);

  expect(await read(sasClient(tokens, 'allowed', entry.sas), 'data/part-0.csv')).toBe('allowed,1\n');
  expect(await read(sasClient(tokens, 'also-allowed', tokens.jobs[JOB]!['also-allowed']!.sas), 'x.txt')).toBe('second container');
  // The same SAS presented for another container: the signature does not cover it.
  expect(await status(read(sasClient(tokens, 'private', entry.sas), 'secret.txt'))).toBe(403);
  // Read-only by default: a write with it is refused.
  expect(await status(sasClient(tokens, 'allowed', entry.sas).getBlockBlobClient('new.txt').upload('x', 1))).toBe(403);
  p.close();
});

test('an expired SAS is refused by Azurite (clock injected two hours back, no sleeping)', async () => {
  const p = provider(() => Date.now() - 2 * HOUR);
  p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'allowed' });
  const obtained = await p.obtainDelegationTokens();
  const tokens = decode<AzureBlobTokens>(obtained.tokens);
  expect(obtained.validUntil).toBeLessThan(Date.now());
  expect(await status(read(sasClient(tokens, 'allowed', tokens.jobs[JOB]!['allowed']!.sas), 'data/part-0.csv'))).toBe(403);
  p.close();
});

test('a configured permission set is honoured (rl lists the container)', async () => {
  const p = provider(undefined, { 'security.delegation.token.provider.azure-blob.permissions': 'rl' });
  p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'allowed' });
  const tokens = decode<AzureBlobTokens>((await p.obtainDelegationTokens()).tokens);
  const names: string[] = [];
  for await (const b of sasClient(tokens, 'allowed', tokens.jobs[JOB]!['allowed']!.sas).listBlobsFlat()) names.push(b.name);
  expect(names).toEqual(['data/part-0.csv']);
  p.close();
});

test('allow-list entries tied to a principal serve only that principal', async () => {
  const p = provider(undefined, {
    'security.delegation.token.provider.azure-blob.allowed-containers': 'also-allowed;token:team-a=private',
  });
  const asA = { principal: 'token:team-a' };
  const asB = { principal: 'token:team-b' };
  expect(await failure(() => p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'private' }, asB))).toContain(
    "container 'private' of account 'tokacct' is not allowed",
  );
  expect(await failure(() => p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'private' }))).toContain('is not allowed');
  p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'also-allowed' }, asB);
  p.registerJob(`${JOB.slice(0, -1)}1`, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'private;also-allowed' }, asA);
  const tokens = decode<AzureBlobTokens>((await p.obtainDelegationTokens()).tokens);
  expect(Object.keys(tokens.jobs[`${JOB.slice(0, -1)}1`] ?? {}).sort()).toEqual(['also-allowed', 'private']);
  expect(Object.keys(tokens.jobs[JOB] ?? {})).toEqual(['also-allowed']);
  expect(await read(sasClient(tokens, 'private', tokens.jobs[`${JOB.slice(0, -1)}1`]!.private!.sas), 'secret.txt')).toBe('not for jobs');
  p.close();
});

test('a job asking for a container that is not allow-listed is rejected at registerJob, and nothing is recorded', async () => {
  const p = provider();
  const message = await failure(() => p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'allowed;private' }));
  expect(message).toContain("container 'private' of account 'tokacct' is not allowed");
  expect(message).toContain('security.delegation.token.provider.azure-blob.allowed-containers');
  expect(message).not.toContain(ACCOUNT.key);
  expect(p.delegationTokensRequired()).toBe(false);
  p.close();
});

describe('auth: user-delegation (Azurite with HTTPS and OAuth)', () => {
  let secure: AzuriteOAuth;
  let agent: HttpsAgent;

  beforeAll(async () => {
    secure = await startAzuriteOAuth([ACCOUNT]);
    agent = new HttpsAgent({ ca: secure.ca });
    const admin = new BlobServiceClient(
      secure.blobUrl(ACCOUNT.name),
      new StorageSharedKeyCredential(ACCOUNT.name, ACCOUNT.key),
      trusting(),
    );
    for (const [container, blob, body] of [
      ['allowed', 'a.txt', 'via user delegation'],
      ['private', 'p.txt', 'not for jobs'],
    ] as const) {
      await admin.getContainerClient(container).createIfNotExists();
      await admin.getContainerClient(container).getBlockBlobClient(blob).upload(body, body.length);
    }
  }, 300_000);

  afterAll(async () => {
    agent?.destroy();
    await secure?.stop();
  });

  /** Pipeline options that trust Azurite's self-signed certificate (`agent` is honoured though untyped, see fs-plugins/azure). */
  function trusting(): StoragePipelineOptions {
    const options: StoragePipelineOptions & { agent: HttpsAgent } = { retryOptions: { maxTries: 1 }, agent };
    return options;
  }

  function udProvider(credential: TokenCredential): AzureBlobDelegationTokenProvider {
    const p = new AzureBlobDelegationTokenProvider({ azureCredential: credential, ca: secure.ca });
    p.init(
      providerConfig('azure-blob', {
        'security.delegation.token.provider.azure-blob.auth': 'user-delegation',
        'security.delegation.token.provider.azure-blob.account-name': ACCOUNT.name,
        'security.delegation.token.provider.azure-blob.endpoint': secure.blobUrl(ACCOUNT.name),
        'security.delegation.token.provider.azure-blob.allowed-containers': 'allowed',
      }),
      { reobtainDelegationTokens: () => {} },
    );
    return p;
  }

  test('a user-delegation SAS (key fetched with the Entra identity) reads its container and is refused on another', async () => {
    const credential = fakeEntraCredential();
    const p = udProvider(credential);
    p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'allowed' });
    const before = Date.now();
    const obtained = await p.obtainDelegationTokens();
    expect(credential.issued).toBeGreaterThan(0);
    const tokens = decode<AzureBlobTokens>(obtained.tokens);
    const { sas, expiresOn } = tokens.jobs[JOB]!['allowed']!;
    expect(sas).toContain('skoid=11059fcc-5514-4800-b5f8-49808b9cfab6'); // signed with a user delegation key
    expect(sas).toContain('spr=https');
    expect(obtained.validUntil).toBe(Date.parse(expiresOn));
    expect(obtained.validUntil! - before).toBeGreaterThan(HOUR - 5_000);

    const client = (container: string) =>
      new ContainerClient(`${tokens.blobEndpoint}/${container}?${sas}`, new AnonymousCredential(), trusting());
    expect((await client('allowed').getBlobClient('a.txt').downloadToBuffer()).toString()).toBe('via user delegation');
    expect(await status(client('private').getBlobClient('p.txt').downloadToBuffer())).toBe(403);
    p.close();
  });

  test('a key request Azurite refuses fails the cycle with the status and the service code', async () => {
    const wrongAudience: TokenCredential = {
      async getToken() {
        const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
        const now = Math.floor(Date.now() / 1000);
        const claims = { aud: 'https://vault.azure.net', iss: 'https://sts.windows.net/t/', iat: now, nbf: now - 60, exp: now + 600 };
        return { token: `${b64({ alg: 'RS256' })}.${b64(claims)}.c2ln`, expiresOnTimestamp: (now + 600) * 1000 };
      },
    };
    const p = udProvider(wrongAudience);
    p.registerJob(JOB, { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'allowed' });
    expect(await failure(() => p.obtainDelegationTokens())).toBe(
      `Get User Delegation Key at ${secure.blobUrl(ACCOUNT.name)} failed: HTTP 403 AuthenticationFailed`,
    );
    p.close();
  });
});
