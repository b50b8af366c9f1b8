import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BlobSASPermissions,
  BlobServiceClient,
  ContainerSASPermissions,
  StorageSharedKeyCredential,
  generateBlobSASQueryParameters,
} from '@azure/storage-blob';
import { startChildServer } from './child-server';
import { projectRoot } from '../../src/project-root';
import type { TlsMaterial } from './tls';

export interface AzuriteAccount {
  name: string;
  /** base64 shared key, e.g. randomBytes(64).toString('base64') */
  key: string;
}

export interface Azurite {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  port: number;
  /** The path-style Blob endpoint of an account: http://127.0.0.1:41234/<account> */
  blobUrl(account: string): string;
  child: ChildProcess;
  stop(): Promise<void>;
}

const READY = /listens on (https?:\/\/\S+)/;

/**
 * Starts Azurite's Blob service; with `oauth`, over https with bearer tokens checked as a child process on 127.0.0.1, port 0, with only
 * the given accounts (AZURITE_ACCOUNTS disables devstoreaccount1). `--skipApiVersionCheck` is
 * required: the SDK sends a newer x-ms-version than Azurite knows. `stop()` kills that child by PID
 * and removes its data directory.
 */
export async function startAzurite(opts: { accounts: AzuriteAccount[]; oauth?: { tls: TlsMaterial } }): Promise<Azurite> {
  const dir = await mkdtemp(join(tmpdir(), 'azurite-'));
  const main = join(projectRoot(__dirname), 'node_modules', 'azurite', 'dist', 'src', 'blob', 'main.js');
  const args = [
    main,
    '--blobHost',
    '127.0.0.1',
    '--blobPort',
    '0',
    '--location',
    dir,
    '--disableTelemetry',
    '--silent',
    '--skipApiVersionCheck',
  ];
  if (opts.oauth) {
    // OAuth mode: bearer tokens are checked for issuer, audience and lifetime (not their signature),
    // and only over https, so Azurite serves TLS with the test's certificate.
    await writeFile(join(dir, 'tls-cert.pem'), opts.oauth.tls.cert);
    await writeFile(join(dir, 'tls-key.pem'), opts.oauth.tls.key);
    args.push('--oauth', 'basic', '--cert', join(dir, 'tls-cert.pem'), '--key', join(dir, 'tls-key.pem'));
  }
  const env = { ...process.env, AZURITE_ACCOUNTS: opts.accounts.map((a) => `${a.name}:${a.key}`).join(';') };
  try {
    const server = await startChildServer('Azurite', process.execPath, args, { env, ready: READY });
    const url = server.match[1]!;
    const stop = async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    };
    return { url, port: Number(new URL(url).port), blobUrl: (account) => `${url}/${account}`, child: server.child, stop };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A fixture client (one quick try: a fixture failure should surface at once, not after 16 s). */
export function fixtureService(azurite: Azurite, account: AzuriteAccount): BlobServiceClient {
  return new BlobServiceClient(azurite.blobUrl(account.name), new StorageSharedKeyCredential(account.name, account.key), {
    retryOptions: { maxTries: 1 },
  });
}

/**
 * Creates `container` if needed and uploads a Buffer, or a file (by path, streamed in 8 MiB blocks);
 * returns the blob's ETag (without quotes) and version id, if any.
 */
export async function uploadBlob(
  azurite: Azurite,
  account: AzuriteAccount,
  container: string,
  blobName: string,
  body: Buffer | string,
): Promise<{ etag?: string; versionId?: string }> {
  const containerClient = fixtureService(azurite, account).getContainerClient(container);
  await containerClient.createIfNotExists();
  const blob = containerClient.getBlockBlobClient(blobName);
  const options = { blockSize: 8 * 1024 * 1024, concurrency: 4 };
  const res = typeof body === 'string' ? await blob.uploadFile(body, options) : await blob.uploadData(body, options);
  return { ...(res.etag ? { etag: res.etag.replace(/"/g, '') } : {}), ...(res.versionId ? { versionId: res.versionId } : {}) };
}

/**
 * A SAS token (query string without '?') for a whole container (`blobName` omitted) or one blob,
 * read-only by default, signed with the account key. `expiresOn` in the past makes an expired token.
 */
export function makeSas(
  account: AzuriteAccount,
  opts: { container: string; blobName?: string; permissions?: string; startsOn?: Date; expiresOn: Date },
): string {
  const permissions =
    opts.blobName === undefined
      ? ContainerSASPermissions.parse(opts.permissions ?? 'r')
      : BlobSASPermissions.parse(opts.permissions ?? 'r');
  return generateBlobSASQueryParameters(
    {
      containerName: opts.container,
      ...(opts.blobName === undefined ? {} : { blobName: opts.blobName }),
      permissions,
      startsOn: opts.startsOn ?? new Date(Date.now() - 60 * 60 * 1000),
      expiresOn: opts.expiresOn,
    },
    new StorageSharedKeyCredential(account.name, account.key),
  ).toString();
}
