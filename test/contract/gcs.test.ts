import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { startFakeGcs } from '../servers/fake-gcs';
import { makeServiceAccount, startGcsFront, startGoogleTokenStandIn, writeKeyFile } from '../servers/fake-gcs-auth';
import { makeSelfSignedCert } from '../servers/tls';
import { fsPluginContract } from './fs-plugin-contract';
import { gcsFileSystem, keyBody } from './gcs-fixture';
import { randomFile } from './plugin-fixtures';

// The fs-plugin contract over a real Cloud Storage emulator (fake-gcs-server), reached as Cloud Storage
// is: over https, with a service-account key file whose assertion a local token endpoint verifies, and
// a front that admits only the tokens that endpoint issued.

const LARGE_SIZE = 64 * 1024 * 1024;

fsPluginContract('gcs', async () => {
  const tls = makeSelfSignedCert();
  const dir = await mkdtemp(join(tmpdir(), 'gcs-contract-'));
  const account = makeServiceAccount();
  // Same account name, another private key: the token endpoint refuses its assertion.
  const impostor = { ...makeServiceAccount(), email: account.email };
  const emulator = await startFakeGcs();
  const token = await startGoogleTokenStandIn({ tls, accounts: [account] });
  const front = await startGcsFront({ tls, target: emulator.url, issued: token.issued });
  const stopAll = async () => {
    await front.stop();
    await token.stop();
    await emulator.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await emulator.createBucket('jars');
    const content = Buffer.from('PK\u0003\u0004 a small jar-ish object for the GCS contract');
    await emulator.upload('jars', 'apps/small.jar', content);
    const largeFile = join(dir, 'large.bin');
    const sha256 = await randomFile(largeFile, LARGE_SIZE);
    await emulator.upload('jars', 'apps/large.jar', largeFile);
    const keyFile = join(dir, 'key.json');
    const wrongKeyFile = join(dir, 'wrong-key.json');
    await writeKeyFile(keyFile, account, token.tokenUrl);
    await writeKeyFile(wrongKeyFile, impostor, token.tokenUrl);
    const exempt = [`127.0.0.1:${front.port}`, `127.0.0.1:${token.port}`];
    const settings = (file: string) => ({ 'fs.gs.auth.service.account.json.keyfile': file, 'fs.gs.storage.root.url': front.url });
    const fs = gcsFileSystem(settings(keyFile), exempt, tls.cert);
    const wrongCredentialsFs = gcsFileSystem(settings(wrongKeyFile), exempt, tls.cert);
    // The token endpoint stays exempt: the store's own connection is the one refused.
    const guardedFs = gcsFileSystem(settings(keyFile), [`127.0.0.1:${token.port}`], tls.cert);
    return {
      fs,
      wrongCredentialsFs,
      guardedFs,
      small: { uri: new URL('gs://jars/apps/small.jar'), content },
      large: { uri: new URL('gs://jars/apps/large.jar'), size: LARGE_SIZE, sha256 },
      missing: new URL('gs://jars/apps/missing.jar'),
      secrets: [keyBody(account.privateKey), keyBody(impostor.privateKey)],
      async close() {
        await Promise.all([fs.close(), wrongCredentialsFs.close(), guardedFs.close()]);
        await stopAll();
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
});

describe('gcs plugin specifics (fake-gcs-server)', () => {
  let emulator: Awaited<ReturnType<typeof startFakeGcs>>;
  const opened: FileSystem[] = [];
  const signal = () => AbortSignal.timeout(30_000);
  const content = Buffer.from('jar bytes for the GCS specifics');
  let first: { generation: string; etag: string };

  const make = (settings: Record<string, string>, allowed = [`127.0.0.1:${emulator.port}`]) => {
    const fs = gcsFileSystem({ 'fs.gs.storage.root.url': emulator.url, 'fs.gs.auth.type': 'UNAUTHENTICATED', ...settings }, allowed);
    opened.push(fs);
    return fs;
  };
  const failure = (p: Promise<unknown>) =>
    p.then(
      () => ({ code: 'resolved', message: '' }),
      (e: { code?: string; message?: string }) => ({ code: e.code, message: String(e.message) }),
    );

  beforeAll(async () => {
    emulator = await startFakeGcs();
    await emulator.createBucket('jars');
    first = await emulator.upload('jars', 'dir/app.jar', content);
    await emulator.upload('jars', 'dir/with space+plus.jar', Buffer.from('odd name'));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(opened.map((f) => f.close()));
    await emulator?.stop();
  });

  it('stat: size, the generation as version, the etag, the stored MD5 as integrity, pinned ranges', async () => {
    const st = await make({}).stat(new URL('gs://jars/dir/app.jar'), signal());
    expect(st).toEqual({
      size: content.length,
      version: first.generation,
      etag: first.etag,
      lastModified: expect.any(Number),
      pinnedRanges: true,
      integrity: { algorithm: 'md5', expected: createHash('md5').update(content).digest('hex') },
    });
  });

  it('open: a whole read carries the x-goog-hash MD5; a range carries none and reports the full size', async () => {
    const fs = make({});
    const whole = await fs.open(new URL('gs://jars/dir/app.jar'), { signal: signal() });
    whole.stream.resume();
    expect(whole.stat).toEqual(
      expect.objectContaining({
        size: content.length,
        version: first.generation,
        integrity: { algorithm: 'md5', expected: createHash('md5').update(content).digest('hex') },
      }),
    );
    const part = await fs.open(new URL('gs://jars/dir/app.jar'), {
      signal: signal(),
      range: { start: 4, end: 8 },
      pin: { version: first.generation },
    });
    const chunks: Buffer[] = [];
    for await (const c of part.stream) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks)).toEqual(content.subarray(4, 9));
    expect(part.stat.integrity).toBeUndefined();
    expect(part.stat.size).toBe(content.length);
  });

  it('reads an object whose name has a space and a plus sign', async () => {
    const { stream } = await make({}).open(new URL('gs://jars/dir/with%20space+plus.jar'), { signal: signal() });
    const chunks: Buffer[] = [];
    for await (const c of stream) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('odd name');
  });

  it("a range pinned to a generation that was overwritten → GW_FETCH_CHANGED (the emulator ignores ifGenerationMatch: the answer's generation is held to the pin)", async () => {
    const fs = make({});
    const before = await emulator.upload('jars', 'dir/moving.jar', randomBytes(64));
    await emulator.upload('jars', 'dir/moving.jar', randomBytes(64));
    const f = await failure(
      fs.open(new URL('gs://jars/dir/moving.jar'), { signal: signal(), range: { start: 0, end: 9 }, pin: { version: before.generation } }),
    );
    expect(f.code).toBe('GW_FETCH_CHANGED');
  });

  it('refuses URIs Cloud Storage could not name, before any connection', async () => {
    const fs = make({}, []);
    for (const u of [
      'gs://Jars/a.jar',
      'gs://jars:443/a.jar',
      'gs://user@jars/a.jar',
      'gs://jars/',
      'gs://ab/a.jar',
      'gs://jars/%E0%A4%A',
      'gs://a..b/x.jar',
    ]) {
      expect(await failure(fs.stat(new URL(u), signal()))).toMatchObject({ code: 'GW_FETCH_URI_INVALID' });
    }
  });

  it('an object stored with Content-Encoding: gzip is refused by name (Cloud Storage would transcode it)', async () => {
    const res = await fetch(`${emulator.url}/upload/storage/v1/b/jars/o?uploadType=multipart`, {
      method: 'POST',
      headers: { 'content-type': 'multipart/related; boundary=b' },
      body: `--b\r\ncontent-type: application/json\r\n\r\n${JSON.stringify({ name: 'dir/gz.jar', contentEncoding: 'gzip' })}\r\n--b\r\ncontent-type: application/octet-stream\r\n\r\nnot really gzip\r\n--b--\r\n`,
    });
    expect(res.status).toBe(200);
    const f = await failure(make({}).stat(new URL('gs://jars/dir/gz.jar'), signal()));
    expect(f).toMatchObject({ code: 'GW_FETCH_URI_INVALID', message: expect.stringContaining('Content-Encoding: gzip') });
  });
});
