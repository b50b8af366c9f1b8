import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gcsPlugin } from '../../fs-plugins/gcs';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { type ConfigError, OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { startFakeGcs, type FakeGcs } from '../servers/fake-gcs';
import {
  makeServiceAccount,
  startGcsFront,
  startGoogleTokenStandIn,
  writeKeyFile,
  type GcsFront,
  type GoogleTokenStandIn,
  type TestServiceAccount,
} from '../servers/fake-gcs-auth';
import { makeSelfSignedCert, type TlsMaterial } from '../servers/tls';
import { gcsFileSystem } from './gcs-fixture';
import { readAll } from './plugin-fixtures';

// Credentials as a Flink user configures them for gs:// (the GCS connector's keys, or Application Default
// Credentials), against fake-gcs-server behind an HTTPS front that admits only tokens issued by a local
// stand-in for Google's token endpoint, which verifies each service-account assertion's signature.

const JAR = Buffer.from("PK\u0003\u0004 a jar read with the cluster's Google credentials");
const URI = new URL('gs://team-jars/apps/app.jar');
const READ_ONLY = 'https://www.googleapis.com/auth/devstorage.read_only';

const failure = (p: Promise<unknown>) =>
  p.then(
    () => ({ code: 'resolved', message: '' }),
    (e: { code?: string; message?: string }) => ({ code: e.code, message: String(e.message) }),
  );

/** A listener that counts connections and answers nothing (a token endpoint that must never be asked). */
async function countingListener(): Promise<{ port: number; accepted: () => number; stop: () => Promise<void> }> {
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
    s.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
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

describe('gcs plugin: credentials from the GCS connector keys and ADC (fake-gcs-server behind a token-checking front)', () => {
  let tls: TlsMaterial;
  let emulator: FakeGcs;
  let token: GoogleTokenStandIn;
  let front: GcsFront;
  let account: TestServiceAccount;
  let dir: string;
  let keyFile: string;
  const opened: FileSystem[] = [];
  const savedEnv = { ...process.env };

  const make = (settings: Record<string, string>, allowed = [`127.0.0.1:${front.port}`, `127.0.0.1:${token.port}`]) => {
    const fs = gcsFileSystem({ 'fs.gs.storage.root.url': front.url, ...settings }, allowed, tls.cert);
    opened.push(fs);
    return fs;
  };
  const read = async (fs: FileSystem) => readAll((await fs.open(URI, { signal: AbortSignal.timeout(30_000) })).stream);

  beforeAll(async () => {
    tls = makeSelfSignedCert();
    account = makeServiceAccount();
    emulator = await startFakeGcs();
    await emulator.createBucket('team-jars');
    await emulator.upload('team-jars', 'apps/app.jar', JAR);
    token = await startGoogleTokenStandIn({ tls, accounts: [account] });
    front = await startGcsFront({ tls, target: emulator.url, issued: token.issued });
    dir = await mkdtemp(join(tmpdir(), 'gcs-cred-'));
    keyFile = join(dir, 'key.json');
    await writeKeyFile(keyFile, account, token.tokenUrl);
  }, 90_000);

  afterEach(() => {
    for (const name of Object.keys(process.env)) if (!(name in savedEnv)) delete process.env[name];
    Object.assign(process.env, savedEnv);
  });

  afterAll(async () => {
    await Promise.all(opened.map((f) => f.close()));
    await front?.stop();
    await token?.stop();
    await emulator?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a service-account key file (fs.gs.auth.service.account.json.keyfile): one token from its token_uri, for the read-only scope, used for stat and open', async () => {
    const [t, f] = [token.requests.length, front.records.length];
    const fs = make({ 'fs.gs.auth.service.account.json.keyfile': keyFile });
    expect((await fs.stat(URI, AbortSignal.timeout(30_000))).size).toBe(JAR.length);
    expect(await read(fs)).toEqual(JAR);
    expect(token.requests.slice(t)).toEqual([
      {
        path: '/token',
        grantType: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
        iss: account.email,
        scope: READ_ONLY,
        valid: true,
        status: 200,
      },
    ]);
    expect(front.records.slice(f).map((r) => r.authorized)).toEqual([true, true]);
  });

  it("Flink's names of the same keys work alike (gs.auth.type, gs.auth.service.account.json.keyfile; google.cloud.auth.service.account.json.keyfile)", async () => {
    expect(await read(make({ 'gs.auth.type': 'SERVICE_ACCOUNT_JSON_KEYFILE', 'gs.auth.service.account.json.keyfile': keyFile }))).toEqual(
      JAR,
    );
    expect(await read(make({ 'google.cloud.auth.service.account.json.keyfile': keyFile }))).toEqual(JAR);
  });

  it("fs.gs.token.server.url wins over the key file's token_uri: the assertion never goes to the file's endpoint", async () => {
    const trap = await countingListener();
    try {
      const trapped = join(dir, 'trapped-key.json');
      await writeKeyFile(trapped, account, `https://127.0.0.1:${trap.port}/token`);
      const n = token.requests.length;
      const fs = make({ 'fs.gs.auth.service.account.json.keyfile': trapped, 'fs.gs.token.server.url': token.tokenUrl }, [
        `127.0.0.1:${front.port}`,
        `127.0.0.1:${token.port}`,
        `127.0.0.1:${trap.port}`,
      ]);
      expect(await read(fs)).toEqual(JAR);
      expect(token.requests.length).toBe(n + 1);
      expect(trap.accepted()).toBe(0);
    } finally {
      await trap.stop();
    }
  });

  it('a key the token endpoint refuses (another private key): GW_FETCH_DENIED with the OAuth error, no key in the message, storage never asked', async () => {
    const impostor: TestServiceAccount = { ...makeServiceAccount(), email: account.email };
    const wrongFile = join(dir, 'impostor.json');
    await writeKeyFile(wrongFile, impostor, token.tokenUrl);
    const n = front.records.length;
    const f = await failure(
      make({ 'fs.gs.auth.service.account.json.keyfile': wrongFile }).open(URI, { signal: AbortSignal.timeout(30_000) }),
    );
    expect(f).toMatchObject({ code: 'GW_FETCH_DENIED', message: expect.stringContaining('400 invalid_grant') });
    expect(f.message).not.toContain(impostor.privateKey.split('\n')[1]!);
    expect(front.records.length).toBe(n);
  });

  it('the token endpoint is held to the restricted-host guard like the store: unexempted, no assertion is sent', async () => {
    const n = token.requests.length;
    const f = await failure(
      make({ 'fs.gs.auth.service.account.json.keyfile': keyFile }, [`127.0.0.1:${front.port}`]).stat(URI, AbortSignal.timeout(30_000)),
    );
    expect(f.code).toBe('GW_FETCH_RESTRICTED_HOST');
    expect(token.requests.length).toBe(n);
  });

  it("Application Default Credentials from GOOGLE_APPLICATION_CREDENTIALS (no gs key set): the key's token_uri, the read-only scope", async () => {
    process.env.GOOGLE_APPLICATION_CREDENTIALS = keyFile;
    const n = token.requests.length;
    expect(await read(make({}))).toEqual(JAR);
    expect(token.requests.slice(n)).toEqual([expect.objectContaining({ iss: account.email, scope: READ_ONLY, valid: true })]);
  });

  it('COMPUTE_ENGINE with GOOGLE_APPLICATION_CREDENTIALS set is refused: ADC would use the file, not the metadata server', async () => {
    process.env.GOOGLE_APPLICATION_CREDENTIALS = keyFile;
    const n = token.requests.length;
    const f = await failure(make({ 'fs.gs.auth.type': 'COMPUTE_ENGINE' }).stat(URI, AbortSignal.timeout(30_000)));
    expect(f).toMatchObject({ code: 'GW_FETCH_DENIED', message: expect.stringContaining('COMPUTE_ENGINE') });
    expect(token.requests.length).toBe(n);
  });

  it('a token is only sent over https: an http root URL with a key file is refused before a token is asked for', async () => {
    const n = token.requests.length;
    const f = await failure(
      make({ 'fs.gs.auth.service.account.json.keyfile': keyFile, 'fs.gs.storage.root.url': emulator.url }, [
        `127.0.0.1:${emulator.port}`,
        `127.0.0.1:${token.port}`,
      ]).stat(URI, AbortSignal.timeout(30_000)),
    );
    expect(f).toMatchObject({ code: 'GW_FETCH_DENIED', message: expect.stringContaining('only sent over https') });
    expect(token.requests.length).toBe(n);
  });

  it('UNAUTHENTICATED sends no token: the front refuses (401 authError) → GW_FETCH_DENIED', async () => {
    const f = await failure(make({ 'fs.gs.auth.type': 'UNAUTHENTICATED' }).stat(URI, AbortSignal.timeout(30_000)));
    expect(f).toMatchObject({ code: 'GW_FETCH_DENIED', message: expect.stringContaining('401 authError') });
    expect(front.records.at(-1)).toMatchObject({ authorized: false });
  });
});

describe('gcs plugin: start-up checks of its keys', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gcs-rules-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const problems = (settings: Record<string, string>): { key: string; message: string }[] => {
    try {
      new OptionsRegistry(gcsPlugin.options, gcsPlugin.rules).resolve(
        new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }])),
      );
      return [];
    } catch (err) {
      return (err as ConfigError).problems.map((p) => ({ key: p.key, message: p.message }));
    }
  };

  it.each([
    ['USER_CREDENTIALS', /not supported by the gateway/],
    ['ACCESS_TOKEN_PROVIDER', /Java access-token provider/],
    ['WORKLOAD_IDENTITY_FEDERATION_CREDENTIAL_CONFIG_FILE', /GOOGLE_APPLICATION_CREDENTIALS/],
    ['OAUTH', /not a GCS connector auth type/],
  ])('fs.gs.auth.type %s stops start-up, naming the key', (type, message) => {
    expect(problems({ 'fs.gs.auth.type': type })).toEqual([{ key: 'fs.gs.auth.type', message: expect.stringMatching(message) }]);
  });

  it('SERVICE_ACCOUNT_JSON_KEYFILE without a key file; a key file that is missing or not a service-account key', async () => {
    expect(problems({ 'gs.auth.type': 'SERVICE_ACCOUNT_JSON_KEYFILE' })).toEqual([
      { key: 'gs.auth.type', message: expect.stringContaining('needs fs.gs.auth.service.account.json.keyfile') },
    ]);
    expect(problems({ 'fs.gs.auth.service.account.json.keyfile': join(dir, 'missing.json') })).toEqual([
      { key: 'fs.gs.auth.service.account.json.keyfile', message: expect.stringContaining('cannot be read (ENOENT)') },
    ]);
    await writeFile(join(dir, 'user.json'), JSON.stringify({ type: 'authorized_user', refresh_token: 'canary-refresh' }));
    const p = problems({ 'fs.gs.auth.service.account.json.keyfile': join(dir, 'user.json') });
    expect(p).toEqual([
      { key: 'fs.gs.auth.service.account.json.keyfile', message: expect.stringContaining('is not a service-account key file') },
    ]);
    expect(JSON.stringify(p)).not.toContain('canary-refresh');
  });

  it('two names of one setting with different values; an http token server', () => {
    expect(problems({ 'fs.gs.project.id': 'a', 'gs.project.id': 'b' })).toEqual([
      { key: 'gs.project.id', message: expect.stringContaining('disagrees with fs.gs.project.id') },
    ]);
    expect(problems({ 'fs.gs.project.id': 'a', 'gs.project.id': 'a' })).toEqual([]);
    expect(problems({ 'fs.gs.token.server.url': 'http://127.0.0.1:1/token' }).map((p) => p.key)).toEqual(['fs.gs.token.server.url']);
  });
});
