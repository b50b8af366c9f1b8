import { createHash, randomBytes } from 'node:crypto';
import { CreateBucketCommand, PutBucketVersioningCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { crc32 } from 'node:zlib';
import { s3Plugin } from '../../fs-plugins/s3';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { startMotoServer, type IamPolicy, type MotoServer } from '../servers/moto-server';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downloadTo } from '../../src/download/download';
import { fixtureClient, putObject, type S3Creds } from '../servers/s3-server';
import { fsPluginContract } from './fs-plugin-contract';
import { pluginFileSystem, readAll } from './plugin-fixtures';
import { s3ContractFixture, s3StaticKeys } from './s3-fixture';

// The S3 plugin against moto's server (PyPI moto[server], test/servers/requirements.txt, installed by
// .ci/run into .tmp/venv): real object versioning, and IAM-checked SigV4 (access key, signature and
// the user's policy) once the fixture has called enableAuth().

const LARGE_SIZE = 32 * 1024 * 1024;
const WRONG_SECRET = randomBytes(30).toString('base64url');

/** Everything in S3, for the fixture writer. */
const ADMIN_POLICY: IamPolicy = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 's3:*', Resource: '*' }] };
/** What a gateway needs to read jars from one bucket, versions included. */
const readerPolicy = (bucket: string): IamPolicy => ({
  Version: '2012-10-17',
  Statement: [
    { Effect: 'Allow', Action: ['s3:GetObject', 's3:GetObjectVersion'], Resource: `arn:aws:s3:::${bucket}/*` },
    { Effect: 'Allow', Action: 's3:ListBucket', Resource: `arn:aws:s3:::${bucket}` },
  ],
});

/** The gateway error code and message a promise rejects with ('resolved' if it does not). */
async function failure(p: Promise<unknown>): Promise<{ code?: string | undefined; message: string } | 'resolved'> {
  return p.then(
    () => 'resolved' as const,
    (e: unknown) => ({ code: (e as { code?: string }).code, message: (e as Error).message }),
  );
}

/** A versioned bucket, created and switched to Versioning=Enabled by a signed, IAM-authorized admin. */
async function versionedBucket(server: MotoServer, admin: S3Creds, bucket: string): Promise<void> {
  const client = fixtureClient(server.url, admin);
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    await client.send(new PutBucketVersioningCommand({ Bucket: bucket, VersioningConfiguration: { Status: 'Enabled' } }));
  } finally {
    client.destroy();
  }
}

/** A moto server with auth on, an admin (fixture writer) and a reader (what the gateway is given). */
async function motoWithUsers(): Promise<{ server: MotoServer; admin: S3Creds; reader: S3Creds }> {
  const server = await startMotoServer();
  try {
    const admin = await server.createUser('fixture-admin', ADMIN_POLICY);
    const reader = await server.createUser('gateway-reader', readerPolicy('jars'));
    await server.enableAuth();
    await versionedBucket(server, admin, 'jars');
    return { server, admin, reader };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

// The wrong-credentials case keeps the reader's real access key id, so moto answers 403
// SignatureDoesNotMatch (an unknown key id is checked below).
fsPluginContract('s3 (moto)', async () => {
  const { server, admin, reader } = await motoWithUsers();
  return s3ContractFixture({
    server,
    writer: admin,
    reader,
    secrets: [reader.secretAccessKey, admin.secretAccessKey],
    largeSize: LARGE_SIZE,
  });
});

describe('s3 plugin on moto: object versions and IAM', () => {
  let server: MotoServer;
  let admin: S3Creds;
  let reader: S3Creds;
  let fs: FileSystem;
  const opened: FileSystem[] = [];
  const make = (creds: S3Creds) => {
    const made = pluginFileSystem(s3Plugin, s3StaticKeys(server.url, creds), [`127.0.0.1:${server.port}`]);
    opened.push(made);
    return made;
  };
  const signal = () => AbortSignal.timeout(30_000);
  const ONE = Buffer.from('version one');
  const TWO = Buffer.from('version two, longer');
  let v1: string;
  let v2: string;

  beforeAll(async () => {
    ({ server, admin, reader } = await motoWithUsers());
    await versionedBucket(server, admin, 'other');
    v1 = (await putObject(server.url, admin, 'jars', 'versioned.jar', ONE)).versionId!;
    v2 = (await putObject(server.url, admin, 'jars', 'versioned.jar', TWO)).versionId!;
    await putObject(server.url, admin, 'other', 'b.jar', Buffer.from('not for the reader'));
    fs = make(reader);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(opened.map((f) => f.close()));
    await server?.stop();
  });

  it("prefers the object's stored full-object checksum to the ETag's MD5: SHA-256 (free), then CRC32; a whole read is checked against it", async () => {
    const bytes = randomBytes(300_000);
    const client = fixtureClient(server.url, admin);
    try {
      await client.send(new PutObjectCommand({ Bucket: 'jars', Key: 'sha.jar', Body: bytes, ChecksumAlgorithm: 'SHA256' }));
      await client.send(new PutObjectCommand({ Bucket: 'jars', Key: 'crc.jar', Body: bytes, ChecksumAlgorithm: 'CRC32' }));
    } finally {
      client.destroy();
    }
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    expect((await fs.stat(new URL('s3://jars/sha.jar'), signal())).integrity).toEqual({ algorithm: 'sha256', expected: sha256 });
    expect((await fs.stat(new URL('s3://jars/crc.jar'), signal())).integrity).toEqual({
      algorithm: 'crc32',
      expected: crc32(bytes).toString(16).padStart(8, '0'),
    });
    for (const key of ['sha.jar', 'crc.jar']) {
      const opened = await fs.open(new URL(`s3://jars/${key}`), { signal: signal() });
      expect(opened.stat.integrity?.algorithm).toBe(key === 'sha.jar' ? 'sha256' : 'crc32');
      await readAll(opened.stream);
      const dir = await mkdtemp(join(tmpdir(), 's3-checksum-'));
      try {
        const got = await downloadTo(fs, new URL(`s3://jars/${key}`), join(dir, 'x'), {
          signal: signal(),
          maxBytes: 1 << 30,
          onProgress: () => undefined,
        });
        expect(got.sha256).toBe(sha256);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    }
  });

  it('two PUTs of the same key get two distinct version ids', () => {
    expect(v1).toEqual(expect.any(String));
    expect(v2).toEqual(expect.any(String));
    expect(v1).not.toBe(v2);
  });

  it('?versionId=<first> reads the first bytes; without it the latest', async () => {
    const old = await fs.open(new URL(`s3://jars/versioned.jar?versionId=${encodeURIComponent(v1)}`), { signal: signal() });
    expect(old.stat).toMatchObject({ version: v1, size: ONE.length });
    expect(await readAll(old.stream)).toEqual(ONE);

    const latest = await fs.open(new URL('s3://jars/versioned.jar'), { signal: signal() });
    expect(latest.stat).toMatchObject({ version: v2, size: TWO.length });
    expect(await readAll(latest.stream)).toEqual(TWO);
  });

  it('stat reports version = the VersionId, for a pinned and for the latest version', async () => {
    expect(await fs.stat(new URL(`s3://jars/versioned.jar?versionId=${encodeURIComponent(v1)}`), signal())).toMatchObject({
      version: v1,
      size: ONE.length,
    });
    expect(await fs.stat(new URL(`s3://jars/versioned.jar?versionId=${encodeURIComponent(v2)}`), signal())).toMatchObject({
      version: v2,
      size: TWO.length,
    });
    expect(await fs.stat(new URL('s3://jars/versioned.jar'), signal())).toMatchObject({ version: v2, size: TWO.length });
  });

  it("a ranged read of an old version returns that version's bytes", async () => {
    const { stream, stat } = await fs.open(new URL(`s3://jars/versioned.jar?versionId=${encodeURIComponent(v1)}`), {
      signal: signal(),
      range: { start: 2, end: 5 },
    });
    expect(await readAll(stream)).toEqual(ONE.subarray(2, 6));
    expect(stat).toMatchObject({ version: v1, size: ONE.length });
  });

  it('a parallel ranged read pins every range to the version its stat saw: an overwrite in between does not mix versions', async () => {
    const big = (fill: number) => Buffer.alloc(3 * 1024 * 1024 + 5, fill);
    await putObject(server.url, admin, 'jars', 'overwritten.jar', big(1));
    const uri = new URL('s3://jars/overwritten.jar');
    const stat = await fs.stat(uri, signal());
    expect(stat).toMatchObject({ pinnedRanges: true, version: expect.any(String) });
    await putObject(server.url, admin, 'jars', 'overwritten.jar', big(2)); // a new version, after the stat
    const dir = await mkdtemp(join(tmpdir(), 'moto-ranged-'));
    try {
      const r = await downloadTo(fs, uri, join(dir, 'f'), {
        signal: signal(),
        maxBytes: 1 << 30,
        onProgress: () => undefined,
        stat,
        parallel: { partSize: 1024 * 1024, concurrency: 3 },
      });
      expect(r.parts).toBe(6); // 4 parts of at most 1 MiB, rounded up to a multiple of the 3 requests
      expect(r.sha256).toBe(createHash('sha256').update(big(1)).digest('hex'));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an unknown versionId → GW_FETCH_NOT_FOUND', async () => {
    const uri = new URL('s3://jars/versioned.jar?versionId=nosuchversion');
    expect(await failure(fs.open(uri, { signal: signal() }))).toMatchObject({
      code: 'GW_FETCH_NOT_FOUND',
      message: expect.stringContaining('404 NoSuchVersion'),
    });
    // HEAD answers carry no body, so no S3 error code: the status alone decides.
    expect(await failure(fs.stat(uri, signal()))).toMatchObject({ code: 'GW_FETCH_NOT_FOUND', message: expect.stringContaining('404') });
  });

  it('IAM is enforced: unknown key id, wrong secret and a bucket outside the policy are all GW_FETCH_DENIED', async () => {
    const small = new URL('s3://jars/versioned.jar');
    const unknownKey = make({ accessKeyId: 'AKIAUNKNOWNKEY000000', secretAccessKey: reader.secretAccessKey });
    expect(await failure(unknownKey.open(small, { signal: signal() }))).toMatchObject({
      code: 'GW_FETCH_DENIED',
      message: expect.stringContaining('403 InvalidAccessKeyId'),
    });
    const wrongSecret = make({ ...reader, secretAccessKey: WRONG_SECRET });
    expect(await failure(wrongSecret.open(small, { signal: signal() }))).toMatchObject({
      code: 'GW_FETCH_DENIED',
      message: expect.stringContaining('403 SignatureDoesNotMatch'),
    });
    // Control: the admin may read the other bucket, the reader's policy names only "jars".
    expect((await make(admin).stat(new URL('s3://other/b.jar'), signal())).size).toBe('not for the reader'.length);
    expect(await failure(fs.open(new URL('s3://other/b.jar'), { signal: signal() }))).toMatchObject({
      code: 'GW_FETCH_DENIED',
      message: expect.stringContaining('403 AccessDenied'),
    });
  });
});
