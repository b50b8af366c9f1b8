import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { s3Plugin } from '../../fs-plugins/s3';
import { putObject, type S3Creds } from '../servers/s3-server';
import type { ContractFixture } from './fs-plugin-contract';
import { pluginFileSystem, randomFile } from './plugin-fixtures';

/** The s3 plugin's settings for one path-style endpoint and one static key pair. */
export const s3StaticKeys = (url: string, creds: S3Creds): Record<string, string> => ({
  's3.endpoint': url,
  's3.path.style.access': 'true',
  's3.access-key': creds.accessKeyId,
  's3.secret-key': creds.secretAccessKey,
});

export interface S3ContractSetup {
  /** A started S3-compatible server in which the bucket `jars` exists. The fixture owns it from here on. */
  server: { url: string; port: number; stop(): Promise<void> };
  /** Puts the fixture objects. */
  writer: S3Creds;
  /** What the plugin under test is configured with. */
  reader: S3Creds;
  /** The server's secrets, none of which may appear in an error message (the fixture adds its wrong one). */
  secrets: string[];
  largeSize: number;
}

/**
 * The contract fixture of the s3 plugin, the same on every S3-compatible server: a small and a large
 * object under `s3://jars/apps/`, and the plugin with the reader's keys, with the reader's key id
 * and a wrong secret (a signature mismatch: 403), and without the server exempted from the
 * restricted-host guard. Stops the server on close, and when the setup itself fails.
 */
export async function s3ContractFixture({ server, writer, reader, secrets, largeSize }: S3ContractSetup): Promise<ContractFixture> {
  const wrongSecret = randomBytes(24).toString('base64url');
  let dir: string | undefined;
  const cleanUp = async () => {
    await server.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  };
  try {
    dir = await mkdtemp(join(tmpdir(), 's3-contract-'));
    const content = Buffer.from('PK\u0003\u0004 a small jar-ish object for the S3 contract');
    await putObject(server.url, writer, 'jars', 'apps/small.jar', content);
    const largeFile = join(dir, 'large.bin');
    const sha256 = await randomFile(largeFile, largeSize);
    await putObject(server.url, writer, 'jars', 'apps/large.jar', largeFile);
    const exempt = [`127.0.0.1:${server.port}`];
    const fs = pluginFileSystem(s3Plugin, s3StaticKeys(server.url, reader), exempt);
    const wrongCredentialsFs = pluginFileSystem(s3Plugin, s3StaticKeys(server.url, { ...reader, secretAccessKey: wrongSecret }), exempt);
    const guardedFs = pluginFileSystem(s3Plugin, s3StaticKeys(server.url, reader), []);
    return {
      fs,
      wrongCredentialsFs,
      guardedFs,
      small: { uri: new URL('s3://jars/apps/small.jar'), content },
      large: { uri: new URL('s3://jars/apps/large.jar'), size: largeSize, sha256 },
      missing: new URL('s3://jars/apps/missing.jar'),
      secrets: [...secrets, wrongSecret],
      async close() {
        await Promise.all([fs.close(), wrongCredentialsFs.close(), guardedFs.close()]);
        await cleanUp();
      },
    };
  } catch (err) {
    await cleanUp();
    throw err;
  }
}
