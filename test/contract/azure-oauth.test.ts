import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { AzureFileSystem, azurePlugin } from '../../fs-plugins/azure';
import { createConnectGuard } from '../../src/net/connect-guard';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { type ConfigError, OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { startAzurite, uploadBlob, type Azurite, type AzuriteAccount } from '../servers/azurite';
import { startEntraStandIn, type EntraStandIn } from '../servers/entra-token-endpoint';
import { makeSelfSignedCert, type TlsMaterial } from '../servers/tls';
import { startTlsForwarder } from '../servers/tls-forwarder';
import { readAll } from './plugin-fixtures';

// ABFS OAuth as a Flink user configures it (fs.azure.account.auth.type: OAuth + a token provider class),
// against Azurite in OAuth mode (https, bearer tokens checked for issuer, audience and lifetime) and a local
// HTTPS stand-in for Entra ID that checks the client id, the secret or federated token, and the scope.

const ACCT: AzuriteAccount = { name: 'clustera', key: randomBytes(64).toString('base64') };
const DFS = `${ACCT.name}.dfs.core.windows.net`;
const TENANT = randomUUID();
const CLIENT_ID = randomUUID();
const SECRET = randomBytes(24).toString('base64url');
const FEDERATED = `eyJhbGciOiJSUzI1NiJ9.${Buffer.from(JSON.stringify({ aud: 'api://AzureADTokenExchange', sub: 'system:serviceaccount:flink:jar-gateway' })).toString('base64url')}.${randomBytes(32).toString('base64url')}`;
const STORAGE_SCOPE = 'https://storage.azure.com/.default';
const JAR = Buffer.from('PK\u0003\u0004 an OAuth-read jar');
const URI = `abfss://jars@${DFS}/apps/app.jar`;
const CLIENT_CREDS = 'org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider';
const WORKLOAD = 'org.apache.hadoop.fs.azurebfs.oauth2.WorkloadIdentityTokenProvider';

const raw = (settings: Record<string, string>) =>
  new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));

const failure = (p: Promise<unknown>) =>
  p.then(
    () => ({ code: 'resolved', message: '' }),
    (e: { code?: string; message?: string }) => ({ code: e.code, message: String(e.message) }),
  );

describe('azure plugin: ABFS OAuth (client secret, workload identity) on Azurite in OAuth mode', () => {
  let tls: TlsMaterial;
  let azurite: Azurite;
  let entra: EntraStandIn;
  let wrongAudience: EntraStandIn;
  let dir: string;
  let tokenFile: string;
  const opened: FileSystem[] = [];
  const savedEnv = { ...process.env };

  const make = (settings: Record<string, string>, token: EntraStandIn = entra) => {
    const fs = new AzureFileSystem({
      config: new OptionsRegistry(azurePlugin.options, azurePlugin.rules).resolve(
        raw({ [`fs.azure.account.endpoint.${ACCT.name}`]: azurite.blobUrl(ACCT.name), ...settings }),
      ),
      log: pino({ level: 'silent' }),
      guard: createConnectGuard({ enabled: true, allowed: [`127.0.0.1:${azurite.port}`, `127.0.0.1:${token.port}`] }),
      ca: tls.cert,
    });
    opened.push(fs);
    return fs;
  };
  const clientSecret = (token: EntraStandIn, secret = SECRET) => ({
    [`fs.azure.account.auth.type.${DFS}`]: 'OAuth',
    [`fs.azure.account.oauth.provider.type.${DFS}`]: CLIENT_CREDS,
    [`fs.azure.account.oauth2.client.id.${DFS}`]: CLIENT_ID,
    [`fs.azure.account.oauth2.client.secret.${DFS}`]: secret,
    [`fs.azure.account.oauth2.client.endpoint.${DFS}`]: token.tokenEndpointV1,
  });
  const read = async (fs: FileSystem) => readAll((await fs.open(new URL(URI), { signal: AbortSignal.timeout(30_000) })).stream);

  beforeAll(async () => {
    tls = makeSelfSignedCert();
    azurite = await startAzurite({ accounts: [ACCT], oauth: { tls } });
    // The fixture writer uses the account key through a plain-HTTP front (the SDK's own client takes no CA).
    const front = await startTlsForwarder(azurite.url, tls.cert);
    try {
      await uploadBlob({ ...azurite, blobUrl: (a: string) => `${front.url}/${a}` }, ACCT, 'jars', 'apps/app.jar', JAR);
    } finally {
      await front.stop();
    }
    const common = { tls, tenantId: TENANT, clientId: CLIENT_ID, clientSecret: SECRET, federatedToken: FEDERATED, scope: STORAGE_SCOPE };
    entra = await startEntraStandIn({ ...common, audience: 'https://storage.azure.com' });
    wrongAudience = await startEntraStandIn({ ...common, audience: 'https://management.azure.com' });
    dir = await mkdtemp(join(tmpdir(), 'azure-wi-'));
    tokenFile = join(dir, 'azure-identity-token');
    await writeFile(tokenFile, FEDERATED);
  }, 300_000);

  afterEach(() => {
    for (const name of Object.keys(process.env)) if (!(name in savedEnv)) delete process.env[name];
    Object.assign(process.env, savedEnv);
  });

  afterAll(async () => {
    await Promise.all(opened.map((f) => f.close()));
    await entra?.stop();
    await wrongAudience?.stop();
    await azurite?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('ClientCredsTokenProvider (per-account keys): the secret goes to the token endpoint, a storage-scoped token to Azurite', async () => {
    const n = entra.requests.length;
    const fs = make(clientSecret(entra));
    expect(await read(fs)).toEqual(JAR);
    expect((await fs.stat(new URL(URI), AbortSignal.timeout(30_000))).size).toBe(JAR.length);
    // One token for both requests (cached), asked with the secret for the storage scope.
    expect(entra.requests.slice(n)).toEqual([
      {
        path: `/${TENANT}/oauth2/v2.0/token`,
        grantType: 'client_credentials',
        clientId: CLIENT_ID,
        scope: STORAGE_SCOPE,
        proof: { kind: 'secret', valid: true },
        status: 200,
      },
    ]);
  });

  it('a wrong secret is refused by the token endpoint: GW_FETCH_DENIED with the AADSTS code, no secret in the message', async () => {
    const wrong = randomBytes(24).toString('base64url');
    const f = await failure(make(clientSecret(entra, wrong)).open(new URL(URI), { signal: AbortSignal.timeout(30_000) }));
    expect(f).toMatchObject({ code: 'GW_FETCH_DENIED', message: expect.stringContaining('AADSTS7000215') });
    expect(f.message).not.toContain(wrong);
  });

  it('Azurite checks the token audience: a token for another resource is refused (403)', async () => {
    const f = await failure(make(clientSecret(wrongAudience), wrongAudience).open(new URL(URI), { signal: AbortSignal.timeout(30_000) }));
    expect(f).toMatchObject({ code: 'GW_FETCH_DENIED', message: expect.stringContaining('403') });
    expect(wrongAudience.requests.at(-1)).toMatchObject({ scope: STORAGE_SCOPE, status: 200 });
  });

  it('the token endpoint is held to the restricted-host guard like the store: unexempted, the secret is never sent', async () => {
    const n = wrongAudience.requests.length;
    // Built with only the other stand-in exempt: this endpoint's address is restricted.
    const f = await failure(make(clientSecret(wrongAudience)).open(new URL(URI), { signal: AbortSignal.timeout(30_000) }));
    expect(f).toMatchObject({ code: 'GW_FETCH_RESTRICTED_HOST' });
    expect(wrongAudience.requests.length).toBe(n);
  });

  it('WorkloadIdentityTokenProvider from the webhook environment (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_AUTHORITY_HOST)', async () => {
    Object.assign(process.env, {
      AZURE_FEDERATED_TOKEN_FILE: tokenFile,
      AZURE_CLIENT_ID: CLIENT_ID,
      AZURE_TENANT_ID: TENANT,
      AZURE_AUTHORITY_HOST: `${entra.authorityHost}/`,
    });
    const n = entra.requests.length;
    const fs = make({ 'fs.azure.account.auth.type': 'OAuth', 'fs.azure.account.oauth.provider.type': WORKLOAD });
    expect(await read(fs)).toEqual(JAR);
    expect(entra.requests.slice(n)).toEqual([
      expect.objectContaining({ clientId: CLIENT_ID, scope: STORAGE_SCOPE, proof: { kind: 'assertion', valid: true }, status: 200 }),
    ]);
  });

  it('WorkloadIdentityTokenProvider from ABFS keys alone (token.file, client.id, msi.tenant, msi.authority)', async () => {
    const n = entra.requests.length;
    const fs = make({
      'fs.azure.account.auth.type': 'OAuth',
      'fs.azure.account.oauth.provider.type': WORKLOAD,
      'fs.azure.account.oauth2.token.file': tokenFile,
      'fs.azure.account.oauth2.client.id': CLIENT_ID,
      'fs.azure.account.oauth2.msi.tenant': TENANT,
      'fs.azure.account.oauth2.msi.authority': entra.authorityHost,
    });
    expect(await read(fs)).toEqual(JAR);
    expect(entra.requests.slice(n)).toEqual([expect.objectContaining({ proof: { kind: 'assertion', valid: true }, status: 200 })]);
  });

  it("MsiTokenProvider: ManagedIdentityCredential asks the node's identity endpoint (App Service form) for a storage token", async () => {
    const header = randomBytes(16).toString('hex');
    const seen: { resource: string | null; clientId: string | null; header: boolean }[] = [];
    const identity: Server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      seen.push({
        resource: url.searchParams.get('resource'),
        clientId: url.searchParams.get('client_id'),
        header: req.headers['x-identity-header'] === header,
      });
      if (req.headers['x-identity-header'] !== header) return res.writeHead(401).end();
      const now = Math.floor(Date.now() / 1000);
      const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
      const token = `${b64({ typ: 'JWT', alg: 'RS256' })}.${b64({ aud: url.searchParams.get('resource'), iss: `https://sts.windows.net/${TENANT}/`, iat: now - 60, nbf: now - 60, exp: now + 3600 })}.c2ln`;
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          access_token: token,
          expires_on: String(now + 3600),
          resource: url.searchParams.get('resource'),
          token_type: 'Bearer',
        }),
      );
    });
    await new Promise<void>((r) => identity.listen(0, '127.0.0.1', () => r()));
    try {
      Object.assign(process.env, {
        IDENTITY_ENDPOINT: `http://127.0.0.1:${(identity.address() as AddressInfo).port}/msi/token`,
        IDENTITY_HEADER: header,
      });
      const fs = make({
        [`fs.azure.account.auth.type.${DFS}`]: 'OAuth',
        [`fs.azure.account.oauth.provider.type.${DFS}`]: 'org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider',
        [`fs.azure.account.oauth2.client.id.${DFS}`]: CLIENT_ID,
      });
      expect(await read(fs)).toEqual(JAR);
      // A user-assigned identity (client.id), asked for the storage resource only.
      expect(seen).toEqual([{ resource: 'https://storage.azure.com', clientId: CLIENT_ID, header: true }]);
    } finally {
      identity.closeAllConnections();
      await new Promise<void>((r) => identity.close(() => r()));
    }
  });

  it('OAuth settings the gateway cannot act on fail start-up naming the key', () => {
    const problems = (settings: Record<string, string>) => {
      try {
        new OptionsRegistry(azurePlugin.options, azurePlugin.rules).resolve(raw(settings));
        return [];
      } catch (err) {
        return (err as ConfigError).problems.map((p) => `${p.key}: ${p.message}`);
      }
    };
    expect(problems({ 'fs.azure.account.auth.type': 'Custom' })).toEqual([
      expect.stringMatching(/^fs\.azure\.account\.auth\.type: 'Custom' is not supported/),
    ]);
    expect(
      problems({
        [`fs.azure.account.auth.type.${DFS}`]: 'OAuth',
        [`fs.azure.account.oauth.provider.type.${DFS}`]: 'org.apache.hadoop.fs.azurebfs.oauth2.RefreshTokenBasedTokenProvider',
      }),
    ).toEqual([
      expect.stringMatching(
        new RegExp(
          `^fs\\.azure\\.account\\.oauth\\.provider\\.type\\.${DFS.replace(/\./g, '\\.')}: names org\\.apache\\.hadoop\\.fs\\.azurebfs\\.oauth2\\.RefreshTokenBasedTokenProvider, which has no counterpart`,
        ),
      ),
    ]);
    expect(problems({ 'fs.azure.account.auth.type': 'OAuth', 'fs.azure.account.oauth2.client.id': 'x' })).toEqual([
      'fs.azure.account.oauth2.client.secret: is needed for OAuth with ClientCredsTokenProvider (global settings)',
      'fs.azure.account.oauth2.client.endpoint: is needed for OAuth with ClientCredsTokenProvider (global settings)',
    ]);
  });

  it('recognised ABFS keys the fetch does not act on are start-up warnings naming them', () => {
    const config = new OptionsRegistry(azurePlugin.options, azurePlugin.rules).resolve(
      raw({
        'fs.azure.account.oauth2.msi.endpoint': 'http://169.254.169.254/x',
        'fs.azure.sas.token.provider.type': 'com.example.Sas',
        'fs.azure.account.oauth.provider.type': CLIENT_CREDS,
      }),
    );
    expect(config.notices.map((n) => n.key)).toEqual([
      'fs.azure.account.oauth2.msi.endpoint',
      'fs.azure.sas.token.provider.type',
      'fs.azure.account.oauth.provider.type',
    ]);
    expect(config.notices[2]?.message).toBe("ignored: the account's fs.azure.account.auth.type is not OAuth");
  });
});
