import type { ChildProcess } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { startChildServer } from './child-server';

export interface S3ServerOptions {
  /** access key id → secret */
  keys: Record<string, string>;
  /** access key id → the only buckets it may touch (a stand-in for bucket policies); unlisted ids may touch all. */
  policy?: Record<string, string[]>;
  buckets: string[];
  /** Buckets with (emulated) versioning: every PUT gets an x-amz-version-id. */
  versionedBuckets?: string[];
}

export interface S3Server {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  port: number;
  child: ChildProcess;
  stop(): Promise<void>;
}

export interface S3Creds {
  accessKeyId: string;
  secretAccessKey: string;
}

const READY = /S3RVER_READY (http:\/\/\S+)/;

/**
 * Starts the SigV4-checking S3 server (test/servers/s3-server.wrapper.cjs) as a child
 * process on 127.0.0.1, port 0. `stop()` kills that child by PID and removes its data directory.
 */
export async function startS3Server(opts: S3ServerOptions): Promise<S3Server> {
  const dir = await mkdtemp(join(tmpdir(), 's3rver-'));
  const env = {
    ...process.env,
    S3RVER_KEYS: Object.entries(opts.keys)
      .map(([id, secret]) => `${id}:${secret}`)
      .join(','),
    S3RVER_POLICY: Object.entries(opts.policy ?? {})
      .map(([id, buckets]) => `${id}:${buckets.join('|')}`)
      .join(','),
    S3RVER_BUCKETS: opts.buckets.join(','),
    S3RVER_VERSIONED_BUCKETS: (opts.versionedBuckets ?? []).join(','),
  };
  try {
    const server = await startChildServer('S3 server', process.execPath, [join(__dirname, 's3-server.wrapper.cjs'), dir], {
      env,
      ready: READY,
    });
    const url = server.match[1]!;
    const stop = async () => {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    };
    return { url, port: Number(new URL(url).port), child: server.child, stop };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A client for fixture uploads; checksums only when required, or s3rver rejects streamed bodies. */
export function fixtureClient(url: string, creds: S3Creds): S3Client {
  return new S3Client({
    endpoint: url,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: creds,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 1,
  });
}

/** Uploads a fixture object (a Buffer, or a file path streamed in 16 MiB parts); returns its ETag and version id. */
export async function putObject(
  url: string,
  creds: S3Creds,
  bucket: string,
  key: string,
  body: Buffer | string,
): Promise<{ etag?: string; versionId?: string }> {
  const client = fixtureClient(url, creds);
  try {
    const upload = new Upload({
      client,
      params: { Bucket: bucket, Key: key, Body: typeof body === 'string' ? createReadStream(body) : body },
      partSize: 16 * 1024 * 1024,
      queueSize: 4,
    });
    const out = await upload.done();
    return { ...(out.ETag ? { etag: out.ETag } : {}), ...(out.VersionId ? { versionId: out.VersionId } : {}) };
  } finally {
    client.destroy();
  }
}
