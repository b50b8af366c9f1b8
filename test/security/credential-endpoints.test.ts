// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import type { AddressInfo } from 'node:net';
import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import type { AccessToken, TokenCredential } from '@azure/identity';
import pino from 'pino';
import { AzureFileSystem, azurePlugin } from '../../fs-plugins/azure';
import { gcsPlugin } from '../../fs-plugins/gcs';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { createConnectGuard } from '../../src/net/connect-guard';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { pluginFileSystem } from '../contract/plugin-fixtures';
import { startAwsRelay, type AwsRelay } from '../servers/aws-relay';
import { startMotoServer } from '../servers/moto-server';
import { fixtureClient, putObject } from '../servers/s3-server';
import { makeServiceAccount, writeKeyFile } from '../servers/fake-gcs-auth';

/**
 * A class of hole (ADR 0009): a credential of the cluster (Azure key, SAS or identity
 * token, S3 signature, configured HTTP headers) goes only to the store endpoint it belongs to, never
 * to a host a URI names. Every listener here is one an attacker would run; the guard exempts them
 * (the worst case: an administrator who allowed loopback), so only the credential rule stands between
 * a submitter's URI and the cluster's secrets. Each case counts connections and credential uses.
 */

/** A TCP listener that counts connections (TLS or not, nothing useful is answered). */
async function countingListener(host = '127.0.0.1'): Promise<{ port: number; accepted: () => number; stop: () => Promise<void> }> {
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
    s.end();
  });
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    stop: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A stand-in for the pod identity (DefaultAzureCredential): it counts who asked for a token. */
function countingCredential(): TokenCredential & { calls: number } {
  const cred = {
    calls: 0,
    async getToken(): Promise<AccessToken> {
      cred.calls++;
      return { token: 'identity-token-canary', expiresOnTimestamp: Date.now() + 3_600_000 };
    },
  };
  return cred;
}

const raw = (settings: Record<string, string>) =>
  new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));

function azureFs(settings: Record<string, string>, allowed: string[], credential: TokenCredential): FileSystem {
  return new AzureFileSystem(
    {
      config: new OptionsRegistry(azurePlugin.options, azurePlugin.rules).resolve(raw(settings)),
      log: pino({ level: 'silent' }),
      guard: createConnectGuard({ enabled: true, allowed }),
    },
    () => credential,
  );
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e: { code?: string }) => e.code ?? String(e),
  );

describe('Azure: the cluster identity, keys and SAS go only to Azure Storage or a configured endpoint', () => {
  let trap: Awaited<ReturnType<typeof countingListener>>;
  beforeAll(async () => {
    trap = await countingListener();
  });
  afterAll(() => trap.stop());

  const hostile = (port: number): string[] => {
    const out: string[] = [];
    for (const scheme of ['wasbs', 'wasb', 'abfss', 'abfs']) {
      for (const host of [
        `127.0.0.1:${port}`,
        `localhost:${port}`,
        `[::ffff:127.0.0.1]:${port}`,
        `attacker.example:${port}`,
        `clustera.blob.core.windows.net.attacker.example:${port}`,
        `clustera.blob.core.windows.net.127.0.0.1.nip.io:${port}`,
        `clusterablob.core.windows.net`,
        `clustera.blob.core.windows.net%2f.attacker.example`,
        `clustera.blob.core.windows.nets`,
        `clustera.dfs.core.windows.net-attacker.example`,
        `clustera.web.core.windows.net`,
        `x.blob.core.windows.net`,
        `clustera.queue.core.windows.net`,
      ]) {
        out.push(`${scheme}://jars@${host}/apps/a.jar`);
      }
    }
    return out;
  };

  it('refuses every URI whose host is not Azure Storage, before any connection or token request', async () => {
    const cred = countingCredential();
    const fs = azureFs({}, [`127.0.0.1:${trap.port}`, `[::ffff:127.0.0.1]:${trap.port}`, `localhost:${trap.port}`], cred);
    const uris = hostile(trap.port);
    const results: Record<string, string> = {};
    for (const u of uris) {
      results[u] = await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)));
      results[`open ${u}`] = await outcome(fs.open(new URL(u), { signal: AbortSignal.timeout(10_000) }));
    }
    await fs.close();
    expect(Object.entries(results).filter(([, code]) => code !== 'GW_FETCH_URI_INVALID')).toEqual([]);
    expect(uris.length).toBeGreaterThanOrEqual(50);
    expect({ connections: trap.accepted(), tokenRequests: cred.calls }).toEqual({ connections: 0, tokenRequests: 0 });
  });

  it('with an account key or SAS configured for the real account, a look-alike host gets neither', async () => {
    const cred = countingCredential();
    const key = Buffer.from('k'.repeat(64)).toString('base64');
    const fs = azureFs(
      {
        'fs.azure.account.key.clustera.blob.core.windows.net': key,
        'fs.azure.sas.jars.clustera.blob.core.windows.net': 'sv=2024&sig=canary',
      },
      [`127.0.0.1:${trap.port}`],
      cred,
    );
    for (const u of hostile(trap.port))
      expect(await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)))).toBe('GW_FETCH_URI_INVALID');
    await fs.close();
    expect({ connections: trap.accepted(), tokenRequests: cred.calls }).toEqual({ connections: 0, tokenRequests: 0 });
  });

  it('with fs.azure.account.endpoint.<account> set, only that account host or the endpoint host is served', async () => {
    const cred = countingCredential();
    const endpoint = `https://127.0.0.1:${trap.port}/clustera`;
    const fs = azureFs({ 'fs.azure.account.endpoint.clustera': endpoint }, [`127.0.0.1:${trap.port}`], cred);
    for (const host of ['clustera.attacker.example', 'clustera.blob.core.windows.net.attacker.example', 'clustera']) {
      expect(await outcome(fs.stat(new URL(`wasbs://jars@${host}/a.jar`), AbortSignal.timeout(10_000)))).toBe('GW_FETCH_URI_INVALID');
    }
    expect(trap.accepted()).toBe(0);
    // The control: the real account host goes to the configured endpoint, with the identity.
    const before = trap.accepted();
    const control = await outcome(fs.stat(new URL('wasbs://jars@clustera.blob.core.windows.net/a.jar'), AbortSignal.timeout(10_000)));
    await fs.close();
    expect(control).not.toBe('GW_FETCH_URI_INVALID');
    expect(trap.accepted()).toBeGreaterThan(before);
    expect(cred.calls).toBeGreaterThan(0);
  });
});

describe('Azure OAuth: the client secret goes only to the configured token endpoint, the token only to the account', () => {
  it('hostile URIs reach neither the token endpoint nor a storage host; the real account asks the token endpoint first', async () => {
    const tokenTrap = await countingListener();
    const storeTrap = await countingListener();
    try {
      const settings = {
        'fs.azure.account.endpoint.clustera': `https://127.0.0.1:${storeTrap.port}/clustera`,
        'fs.azure.account.auth.type': 'OAuth',
        'fs.azure.account.oauth.provider.type': 'org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider',
        'fs.azure.account.oauth2.client.id': 'client-canary',
        'fs.azure.account.oauth2.client.secret': 'secret-canary',
        'fs.azure.account.oauth2.client.endpoint': `https://127.0.0.1:${tokenTrap.port}/tenant/oauth2/token`,
      };
      const fs = pluginFileSystem(azurePlugin, settings, [`127.0.0.1:${tokenTrap.port}`, `127.0.0.1:${storeTrap.port}`]);
      for (const u of [
        'wasbs://jars@clustera.attacker.example/a.jar',
        `abfss://jars@127.0.0.1:${storeTrap.port}/a.jar`,
        'wasbs://jars@clustera.blob.core.windows.net.attacker.example/a.jar',
      ]) {
        expect(await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)))).toBe('GW_FETCH_URI_INVALID');
      }
      expect({ token: tokenTrap.accepted(), store: storeTrap.accepted() }).toEqual({ token: 0, store: 0 });
      // The control: the account's own URI asks the token endpoint (which answers nothing) and sends storage nothing without a token.
      expect(await outcome(fs.stat(new URL('abfss://jars@clustera.dfs.core.windows.net/a.jar'), AbortSignal.timeout(20_000)))).toBe(
        'GW_FETCH_DENIED',
      );
      await fs.close();
      expect(tokenTrap.accepted()).toBeGreaterThan(0);
      expect(storeTrap.accepted()).toBe(0);
    } finally {
      await tokenTrap.stop();
      await storeTrap.stop();
    }
  });
});

describe('S3: a bucket name cannot steer where the signature goes', () => {
  it('refuses bucket names that are not S3 bucket names, before signing or connecting', async () => {
    const trap = await countingListener();
    try {
      const fs = pluginFileSystem(
        s3Plugin,
        {
          's3.endpoint': `http://127.0.0.1:${trap.port}`,
          's3.access-key': 'AKIACANARY',
          's3.secret-key': 'secret-canary',
          's3.path.style.access': 'false',
        },
        [`127.0.0.1:${trap.port}`],
      );
      const buckets = [
        'a%40attacker.example',
        'attacker.example%2F',
        'a%3A1',
        '..',
        'a..b',
        '-a',
        'a-',
        'a%00b',
        'a%23b',
        'a%2Fb',
        'x'.repeat(300),
      ];
      const results: Record<string, string> = {};
      for (const b of buckets) results[b] = await outcome(fs.stat(new URL(`s3://${b}/k.jar`), AbortSignal.timeout(10_000)));
      expect(Object.entries(results).filter(([, code]) => code !== 'GW_FETCH_URI_INVALID')).toEqual([]);
      expect(trap.accepted()).toBe(0);
      // The control: a valid bucket reaches the configured endpoint (which answers nothing useful).
      const control = await outcome(fs.stat(new URL('s3://jars/k.jar'), AbortSignal.timeout(10_000)));
      await fs.close();
      expect(control).not.toBe('GW_FETCH_URI_INVALID');
      expect(trap.accepted()).toBeGreaterThan(0);
    } finally {
      await trap.stop();
    }
  });
});

describe('S3 assumed roles: the base credentials go only to STS, the role only to the S3 endpoint', () => {
  it('a hostile bucket name reaches neither the STS endpoint nor the S3 endpoint', async () => {
    const stsTrap = await countingListener();
    const s3Trap = await countingListener();
    try {
      const fs = pluginFileSystem(
        s3Plugin,
        {
          's3.endpoint': `http://127.0.0.1:${s3Trap.port}`,
          's3.access-key': 'AKIACANARY',
          's3.secret-key': 'secret-canary',
          'fs.s3a.assumed.role.arn': 'arn:aws:iam::123456789012:role/r',
          'fs.s3a.assumed.role.sts.endpoint': `http://127.0.0.1:${stsTrap.port}`,
        },
        [`127.0.0.1:${s3Trap.port}`, `127.0.0.1:${stsTrap.port}`],
      );
      for (const b of ['a%40attacker.example', 'attacker.example%2F', 'a%3A1', '..', 'a%2Fb']) {
        expect(await outcome(fs.stat(new URL(`s3://${b}/k.jar`), AbortSignal.timeout(10_000)))).toBe('GW_FETCH_URI_INVALID');
      }
      expect({ sts: stsTrap.accepted(), s3: s3Trap.accepted() }).toEqual({ sts: 0, s3: 0 });
      // The control: a valid bucket first asks STS (the trap answers nothing), and S3 is never tried unsigned.
      expect(await outcome(fs.stat(new URL('s3://jars/k.jar'), AbortSignal.timeout(10_000)))).not.toBe('GW_FETCH_URI_INVALID');
      await fs.close();
      expect(stsTrap.accepted()).toBeGreaterThan(0);
      expect(s3Trap.accepted()).toBe(0);
    } finally {
      await stsTrap.stop();
      await s3Trap.stop();
    }
  });

  it('on moto behind recording relays: static keys and an IRSA token file each sign only STS; S3 sees only the assumed role', async () => {
    const moto = await startMotoServer();
    const dir = await mkdtemp(join(tmpdir(), 'cred-irsa-'));
    const saved = { ...process.env };
    const relays: AwsRelay[] = [];
    try {
      const admin = await moto.createUser('admin', {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Action: 's3:*', Resource: '*' }],
      });
      const base = await moto.createUser('base', {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Action: 'sts:AssumeRole', Resource: '*' }],
      });
      const oidc = await moto.createUser('oidc', {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Action: 'sts:*', Resource: '*' }],
      });
      const role = await moto.createRole('reader', {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Action: 's3:GetObject', Resource: 'arn:aws:s3:::jars/*' }],
      });
      const pod = await moto.createRole('pod', {
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Action: 'sts:AssumeRole', Resource: '*' }],
      });
      await moto.enableAuth();
      const client = fixtureClient(moto.url, admin);
      await client.send(new CreateBucketCommand({ Bucket: 'jars' })).finally(() => client.destroy());
      await putObject(moto.url, admin, 'jars', 'a.jar', Buffer.from('jar'));
      const token = `eyJhbGciOiJSUzI1NiJ9.${Buffer.from('{"aud":"sts.amazonaws.com"}').toString('base64url')}.c2ln`;
      const tokenFile = join(dir, 'token');
      await writeFile(tokenFile, token);
      const sts = await startAwsRelay({ target: moto.url, webIdentityToken: token, webIdentitySigner: oidc });
      const s3 = await startAwsRelay({ target: moto.url });
      relays.push(sts, s3);
      for (const name of Object.keys(process.env)) if (name.startsWith('AWS_')) delete process.env[name];
      Object.assign(process.env, {
        AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile,
        AWS_ROLE_ARN: pod,
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: join(dir, 'none'),
        AWS_SHARED_CREDENTIALS_FILE: join(dir, 'none'),
      });
      const common = {
        's3.endpoint': s3.url,
        's3.path.style.access': 'true',
        'fs.s3a.assumed.role.arn': role,
        'fs.s3a.assumed.role.sts.endpoint': sts.url,
      };
      const allowed = [`127.0.0.1:${s3.port}`, `127.0.0.1:${sts.port}`];
      const kinds: Record<string, string>[] = [
        { 's3.access-key': base.accessKeyId, 's3.secret-key': base.secretAccessKey },
        { 'fs.s3a.assumed.role.credentials.provider': 'com.amazonaws.auth.WebIdentityTokenCredentialsProvider' },
      ];
      for (const settings of kinds) {
        const [s, o] = [sts.records.length, s3.records.length];
        const fs = pluginFileSystem(s3Plugin, { ...common, ...settings }, allowed);
        expect(await outcome(fs.stat(new URL('s3://jars/a.jar'), AbortSignal.timeout(30_000)))).toBe('resolved');
        await fs.close();
        const stsSigners = new Set(sts.records.slice(s).map((r) => r.accessKeyId));
        const s3Signers = new Set(s3.records.slice(o).map((r) => r.accessKeyId));
        // STS: the base key pair, or (IRSA) nothing for the token exchange and then the pod's session.
        if ('s3.access-key' in settings) expect(stsSigners).toEqual(new Set([base.accessKeyId]));
        else expect(stsSigners.has(undefined)).toBe(true);
        expect(s3Signers.size).toBe(1);
        expect([...s3Signers].filter((k) => k === undefined || stsSigners.has(k) || k === base.accessKeyId)).toEqual([]);
        // The token itself went only to STS, and only once per exchange.
        expect(s3.records.slice(o).filter((r) => r.params !== undefined)).toEqual([]);
      }
    } finally {
      for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
      Object.assign(process.env, saved);
      for (const r of relays) await r.stop();
      await moto.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('GCS: the service-account assertion goes only to the token endpoint, the token only to the storage root URL', () => {
  it('a URI names a bucket, never a host: hostile buckets reach neither endpoint; the real one asks the token endpoint first and sends storage nothing without a token', async () => {
    const tokenTrap = await countingListener();
    const storeTrap = await countingListener();
    const dir = await mkdtemp(join(tmpdir(), 'cred-gcs-'));
    try {
      const keyFile = join(dir, 'key.json');
      await writeKeyFile(keyFile, makeServiceAccount(), `https://127.0.0.1:${tokenTrap.port}/token`);
      const fs = pluginFileSystem(
        gcsPlugin,
        { 'fs.gs.auth.service.account.json.keyfile': keyFile, 'fs.gs.storage.root.url': `https://127.0.0.1:${storeTrap.port}/` },
        [`127.0.0.1:${tokenTrap.port}`, `127.0.0.1:${storeTrap.port}`],
      );
      const hostile = [
        `gs://attacker.example:${storeTrap.port}/a.jar`,
        'gs://user:pw@jars/a.jar',
        'gs://jars.attacker.example%2F/a.jar',
        'gs://a%40attacker.example/a.jar',
        'gs://127.0.0.1/a.jar',
        'gs://JARS/a.jar',
        'gs://-jars/a.jar',
        'gs://jars/',
        'gs://a..b/a.jar',
        `gs://[::1]:${storeTrap.port}/a.jar`,
      ];
      const results: Record<string, string> = {};
      for (const u of hostile) results[u] = await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)));
      expect(Object.entries(results).filter(([, code]) => code !== 'GW_FETCH_URI_INVALID')).toEqual([]);
      expect({ token: tokenTrap.accepted(), store: storeTrap.accepted() }).toEqual({ token: 0, store: 0 });
      // The control: a valid bucket asks the token endpoint (which answers nothing) and sends storage nothing without a token.
      expect(await outcome(fs.stat(new URL('gs://jars/a.jar'), AbortSignal.timeout(30_000)))).not.toBe('GW_FETCH_URI_INVALID');
      await fs.close();
      expect(tokenTrap.accepted()).toBeGreaterThan(0);
      expect(storeTrap.accepted()).toBe(0);
    } finally {
      await tokenTrap.stop();
      await storeTrap.stop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('HTTP: user.artifacts.http-headers go only to the listed host:port', () => {
  it('sends the headers to no other spelling, port or host', async () => {
    const seen: { host: string; headers: IncomingHttpHeaders }[] = [];
    const server = createHttpServer((req, res) => {
      seen.push({ host: String(req.headers.host), headers: req.headers });
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const other = createHttpServer((req, res) => {
      seen.push({ host: String(req.headers.host), headers: req.headers });
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    const otherPort = (other.address() as AddressInfo).port;
    try {
      const fs = pluginFileSystem(
        httpPlugin,
        {
          'user.artifacts.raw-http-enabled': 'true',
          'user.artifacts.http-headers': 'Authorization:Bearer header-canary',
          'gateway.artifacts.http-headers.hosts': `repo.internal:${port}`,
        },
        [`127.0.0.1:${port}`, `127.0.0.1:${otherPort}`],
      );
      for (const u of [
        `http://127.0.0.1:${port}/a.jar`,
        `http://127.0.0.1:${otherPort}/a.jar`,
        `http://2130706433:${port}/a.jar`,
        `http://0x7f.1:${port}/a.jar`,
        `http://[::ffff:127.0.0.1]:${port}/a.jar`,
      ]) {
        await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)));
      }
      await fs.close();
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.filter((s) => s.headers.authorization !== undefined)).toEqual([]);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
      await new Promise<void>((r) => other.close(() => r()));
    }
  });
});
