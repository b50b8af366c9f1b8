import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { downloadTo } from '../../src/download/download';
import { s3Plugin } from '../../fs-plugins/s3';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { putObject, startS3Server, type S3Server } from '../servers/s3-server';
import { fsPluginContract } from './fs-plugin-contract';
import { pluginFileSystem, readAll } from './plugin-fixtures';
import { s3ContractFixture, s3StaticKeys } from './s3-fixture';

const A = { accessKeyId: 'AKIDCLUSTERA', secretAccessKey: randomBytes(24).toString('base64url') };
const B = { accessKeyId: 'AKIDCLUSTERB', secretAccessKey: randomBytes(24).toString('base64url') };
const WRONG_SECRET = randomBytes(24).toString('base64url');
const LARGE_SIZE = 64 * 1024 * 1024;

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  return p.then(
    () => 'resolved',
    (e: unknown) => (e as { code?: string }).code,
  );
}

fsPluginContract('s3', async () => {
  const server = await startS3Server({ keys: { [A.accessKeyId]: A.secretAccessKey }, buckets: ['jars'] });
  return s3ContractFixture({ server, writer: A, reader: A, secrets: [A.secretAccessKey], largeSize: LARGE_SIZE });
});

describe('s3 plugin specifics', () => {
  let server: S3Server;
  let exempt: string[];
  const opened: FileSystem[] = [];
  const make = (settings: Record<string, string>, allowed = exempt) => {
    const fs = pluginFileSystem(s3Plugin, settings, allowed);
    opened.push(fs);
    return fs;
  };
  const signal = () => AbortSignal.timeout(30_000);
  let v1: string;

  beforeAll(async () => {
    server = await startS3Server({
      keys: { [A.accessKeyId]: A.secretAccessKey, [B.accessKeyId]: B.secretAccessKey },
      policy: { [A.accessKeyId]: ['jars-a'], [B.accessKeyId]: ['jars-b'] },
      buckets: ['jars-a', 'jars-b'],
      versionedBuckets: ['jars-a'],
    });
    exempt = [`127.0.0.1:${server.port}`];
    await putObject(server.url, A, 'jars-a', 'a.jar', Buffer.from('bucket A'));
    await putObject(server.url, B, 'jars-b', 'b.jar', Buffer.from('bucket B'));
    await putObject(server.url, A, 'jars-a', 'dir/with space+plus.jar', Buffer.from('odd key'));
    v1 = (await putObject(server.url, A, 'jars-a', 'versioned.jar', Buffer.from('version one'))).versionId!;
    await putObject(server.url, A, 'jars-a', 'versioned.jar', Buffer.from('version two, longer'));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(opened.map((fs) => fs.close()));
    await server?.stop();
  });

  it('an object overwritten after its stat fails a parallel ranged read with GW_FETCH_CHANGED (this server ignores If-Match; the ETag check holds)', async () => {
    const fs = make(s3StaticKeys(server.url, B));
    await putObject(server.url, B, 'jars-b', 'overwritten.jar', Buffer.alloc(3 * 1024 * 1024, 1));
    const uri = new URL('s3://jars-b/overwritten.jar');
    const stat = await fs.stat(uri, signal());
    expect(stat).toMatchObject({ pinnedRanges: true, etag: expect.any(String) });
    await putObject(server.url, B, 'jars-b', 'overwritten.jar', Buffer.alloc(3 * 1024 * 1024, 2));
    const dir = await mkdtemp(join(tmpdir(), 's3-ranged-'));
    try {
      const err = await downloadTo(fs, uri, join(dir, 'f'), {
        signal: signal(),
        maxBytes: 1 << 30,
        onProgress: () => undefined,
        stat,
        parallel: { partSize: 1024 * 1024, concurrency: 3 },
      }).then(
        () => undefined,
        (e: unknown) => e as { code?: string },
      );
      expect(err?.code).toBe('GW_FETCH_CHANGED');
      // downloadTo closed the file; the fetcher unlinks it (ranged-fetch.test.ts checks the cache stays clean).
      expect(await readdir(dir)).toEqual(['f']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('per-bucket keys (fs.s3a.bucket.<bucket>.access.key) select other credentials', async () => {
    // The server's policy lets key A read only jars-a and key B only jars-b.
    const globalOnly = make(s3StaticKeys(server.url, A));
    expect(await codeOf(globalOnly.stat(new URL('s3://jars-b/b.jar'), signal()))).toBe('GW_FETCH_DENIED');

    const fs = make({
      ...s3StaticKeys(server.url, A),
      'fs.s3a.bucket.jars-b.access.key': B.accessKeyId,
      'fs.s3a.bucket.jars-b.secret.key': B.secretAccessKey,
    });
    expect((await readAll((await fs.open(new URL('s3://jars-b/b.jar'), { signal: signal() })).stream)).toString()).toBe('bucket B');
    expect((await readAll((await fs.open(new URL('s3://jars-a/a.jar'), { signal: signal() })).stream)).toString()).toBe('bucket A');
  });

  it('a per-bucket endpoint (fs.s3a.bucket.<bucket>.endpoint) overrides s3.endpoint; an unreachable one is GW_FETCH_UNAVAILABLE', async () => {
    const dead = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as AddressInfo;
        s.close(() => resolve(port));
      });
    });
    const fs = make({ ...s3StaticKeys(`http://127.0.0.1:${dead}`, A), 'fs.s3a.bucket.jars-a.endpoint': server.url }, [
      ...exempt,
      `127.0.0.1:${dead}`,
    ]);
    expect((await fs.stat(new URL('s3://jars-a/a.jar'), signal())).size).toBe(8);
    const err = await fs.stat(new URL('s3://jars-other/x.jar'), signal()).catch((e: unknown) => e as { code?: string; message: string });
    expect(err).toMatchObject({ code: 'GW_FETCH_UNAVAILABLE' });
    expect((err as Error).message).toContain('ECONNREFUSED');
  });

  it('?versionId= reads that version (versioning emulated by test/servers/s3-server.wrapper.cjs)', async () => {
    const fs = make(s3StaticKeys(server.url, A));
    const latest = await fs.stat(new URL('s3://jars-a/versioned.jar'), signal());
    expect(latest.version).toBeDefined();
    expect(latest.version).not.toBe(v1);

    const old = new URL(`s3://jars-a/versioned.jar?versionId=${v1}`);
    expect(await fs.stat(old, signal())).toMatchObject({ version: v1, size: 'version one'.length });
    const { stream, stat } = await fs.open(old, { signal: signal() });
    expect(stat.version).toBe(v1);
    expect((await readAll(stream)).toString()).toBe('version one');
    expect((await readAll((await fs.open(new URL('s3://jars-a/versioned.jar'), { signal: signal() })).stream)).toString()).toBe(
      'version two, longer',
    );

    expect(await codeOf(fs.open(new URL('s3://jars-a/versioned.jar?versionId=nosuchversion'), { signal: signal() }))).toBe(
      'GW_FETCH_NOT_FOUND',
    );
  });

  it('s3a:// and s3p:// name the same objects, and keys are percent-decoded', async () => {
    const fs = make(s3StaticKeys(server.url, A));
    for (const scheme of ['s3a', 's3p']) {
      const { stream } = await fs.open(new URL(`${scheme}://jars-a/a.jar`), { signal: signal() });
      expect((await readAll(stream)).toString()).toBe('bucket A');
    }
    const { stream } = await fs.open(new URL('s3://jars-a/dir/with%20space%2Bplus.jar'), { signal: signal() });
    expect((await readAll(stream)).toString()).toBe('odd key');
  });

  it('a ranged open reports the whole object size', async () => {
    const fs = make(s3StaticKeys(server.url, A));
    const { stream, stat } = await fs.open(new URL('s3://jars-a/a.jar'), { signal: signal(), range: { start: 1, end: 3 } });
    expect((await readAll(stream)).toString()).toBe('uck');
    expect(stat.size).toBe(8);
  });

  it('an empty key or bucket is GW_FETCH_URI_INVALID', async () => {
    const fs = make(s3StaticKeys(server.url, A));
    for (const uri of ['s3://jars-a/', 's3://jars-a', 's3a://jars-a/', 's3:///a.jar']) {
      expect([uri, await codeOf(fs.stat(new URL(uri), signal()))]).toEqual([uri, 'GW_FETCH_URI_INVALID']);
      expect([uri, await codeOf(fs.open(new URL(uri), { signal: signal() }))]).toEqual([uri, 'GW_FETCH_URI_INVALID']);
    }
  });

  it('without static keys the AWS default credential chain is used (here: its environment provider)', async () => {
    const names = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_CREDENTIAL_EXPIRATION', 'AWS_PROFILE'] as const;
    const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
    const settings = { 's3.endpoint': server.url, 's3.path.style.access': 'true' };
    try {
      for (const n of names) delete process.env[n];
      process.env.AWS_ACCESS_KEY_ID = A.accessKeyId;
      process.env.AWS_SECRET_ACCESS_KEY = A.secretAccessKey;
      expect((await make(settings).stat(new URL('s3://jars-a/a.jar'), signal())).size).toBe(8);
      // Control: the same plugin with a wrong secret in the environment is refused, so it was the
      // environment's key that signed the request above.
      process.env.AWS_SECRET_ACCESS_KEY = WRONG_SECRET;
      expect(await codeOf(make(settings).stat(new URL('s3://jars-a/a.jar'), signal()))).toBe('GW_FETCH_DENIED');
    } finally {
      for (const n of names) {
        if (saved[n] === undefined) delete process.env[n];
        else process.env[n] = saved[n];
      }
    }
  });

  it('a DNS-named endpoint is checked by the guarded lookup at connect time', async () => {
    const byName = { ...s3StaticKeys(`http://localhost:${server.port}`, A) };
    expect(await codeOf(make(byName, []).stat(new URL('s3://jars-a/a.jar'), signal()))).toBe('GW_FETCH_RESTRICTED_HOST');
    expect((await make(byName, [`localhost:${server.port}`]).stat(new URL('s3://jars-a/a.jar'), signal())).size).toBe(8);
  });

  it('a half key pair or a bad endpoint fails the plugin options (rules and url type) with GW_CONFIG_INVALID naming the key', () => {
    for (const [settings, missing] of [
      [{ 's3.access-key': A.accessKeyId }, 's3.secret-key'],
      [{ 'fs.s3a.bucket.jars-b.secret.key': B.secretAccessKey }, 'fs.s3a.bucket.jars-b.access.key'],
      [{ 's3.endpoint': 'ftp://example.com' }, 's3.endpoint'],
    ] as const) {
      let err: unknown;
      try {
        pluginFileSystem(s3Plugin, settings, []);
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ code: 'GW_CONFIG_INVALID' });
      expect((err as Error).message).toContain(missing);
      expect((err as Error).message).not.toContain(B.secretAccessKey);
    }
  });
});
