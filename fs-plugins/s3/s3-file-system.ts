import { PassThrough, Readable } from 'node:stream';
import { GetObjectCommand, HeadObjectCommand, type GetObjectCommandOutput, type S3Client } from '@aws-sdk/client-s3';
import type { Logger } from 'pino';
import type { ConnectGuard, FileSystem, ObjectStat, OpenedObject, OpenOptions } from '../../src/artifacts/fs-plugin';
import { fetchError } from '../../src/artifacts/fetch-error';
import { abortReason, translateS3Error } from './errors';
import type { S3Settings } from './options';
import { endpointPort, S3ClientCache } from './s3-client-cache';
import { parseS3Uri, type S3Location } from './s3-uri';

export interface S3FileSystemDeps {
  settings: S3Settings;
  guard: ConnectGuard;
  log: Logger;
  ca?: string;
}

interface HeadLike {
  ContentLength?: number;
  ContentRange?: string;
  ETag?: string;
  VersionId?: string;
  LastModified?: Date;
}

/** Reads objects from S3 and S3-compatible stores (`s3://`, `s3a://`, `s3p://`). */
export class S3FileSystem implements FileSystem {
  readonly supportsRange = true;
  private readonly clients: S3ClientCache;

  constructor(private readonly deps: S3FileSystemDeps) {
    this.clients = new S3ClientCache({ guard: deps.guard, log: deps.log, ...(deps.ca !== undefined ? { ca: deps.ca } : {}) });
  }

  async stat(uri: URL, signal: AbortSignal): Promise<ObjectStat> {
    const { client, location } = this.prepare(uri, signal);
    try {
      const out = await client.send(
        new HeadObjectCommand({ Bucket: location.bucket, Key: location.key, VersionId: location.versionId }),
        { abortSignal: signal },
      );
      return toStat(out);
    } catch (err) {
      throw translateS3Error(err, uri, signal);
    }
  }

  async open(uri: URL, options: OpenOptions): Promise<OpenedObject> {
    const { signal, range } = options;
    const { client, location } = this.prepare(uri, signal);
    if (range && (range.start < 0 || range.end < range.start)) throw fetchError.invalid(uri, `bad byte range ${range.start}-${range.end}`);
    let out: GetObjectCommandOutput;
    try {
      out = await client.send(
        new GetObjectCommand({
          Bucket: location.bucket,
          Key: location.key,
          VersionId: location.versionId,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
        { abortSignal: signal },
      );
    } catch (err) {
      throw translateS3Error(err, uri, signal);
    }
    if (!(out.Body instanceof Readable)) {
      // Only a non-Node runtime would hand back a web stream or Blob; release it and fail clearly.
      (out.Body as { destroy?: () => void } | undefined)?.destroy?.();
      throw fetchError.unavailable(uri, 'the S3 response had no readable body');
    }
    const stat = toStat(out);
    const integrity = range ? undefined : etagIntegrity(out);
    if (integrity) stat.integrity = integrity;
    return { stream: guardBody(out.Body, uri, signal), stat };
  }

  async close(): Promise<void> {
    this.clients.close();
  }

  private prepare(uri: URL, signal: AbortSignal): { client: S3Client; location: S3Location } {
    if (signal.aborted) throw abortReason(signal);
    const location = parseS3Uri(uri);
    const target = this.deps.settings.forBucket(location.bucket);
    // Node connects to IP literals without a lookup, so the agent's guarded lookup never sees them.
    if (target.endpoint) this.deps.guard.checkHost(target.endpoint.hostname, endpointPort(target.endpoint));
    return { client: this.clients.get(target), location };
  }
}

/**
 * End-to-end check for a whole-object read: a single-part object's ETag is the MD5 of its bytes,
 * unless it is encrypted with KMS or a customer key (then the ETag is opaque) or was uploaded in
 * parts (`-N` suffix). Anything else: no claim, rather than a false mismatch.
 */
function etagIntegrity(out: GetObjectCommandOutput): ObjectStat['integrity'] {
  const etag = out.ETag?.replace(/^(W\/)?"|"$/g, '');
  if (!etag || !/^[0-9a-f]{32}$/i.test(etag)) return undefined;
  if (out.SSECustomerAlgorithm || out.ServerSideEncryption?.startsWith('aws:kms')) return undefined;
  return { algorithm: 'md5', expected: etag.toLowerCase() };
}

function toStat(out: HeadLike): ObjectStat {
  const stat: ObjectStat = {};
  // For a ranged GET, Content-Length is the slice; the object's size is after the '/'.
  const total = out.ContentRange ? /\/(\d+)$/.exec(out.ContentRange)?.[1] : undefined;
  const size = total !== undefined ? Number(total) : out.ContentLength;
  if (size !== undefined) stat.size = size;
  if (out.ETag) stat.etag = out.ETag.replace(/^(W\/)?"|"$/g, '');
  if (out.VersionId && out.VersionId !== 'null') stat.version = out.VersionId;
  if (out.LastModified) stat.lastModified = out.LastModified.getTime();
  return stat;
}

/**
 * The body as the caller sees it: aborting `signal` destroys the socket, and mid-stream failures
 * (reset, socket timeout) surface as gateway errors rather than raw socket errors.
 */
function guardBody(body: Readable, uri: URL, signal: AbortSignal): Readable {
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  const onAbort = () => {
    body.destroy();
    out.destroy(abortReason(signal));
  };
  signal.addEventListener('abort', onAbort, { once: true });
  body.once('error', (err) => out.destroy(translateS3Error(err, uri, signal)));
  body.once('close', () => {
    if (!body.readableEnded && !out.destroyed) out.destroy(fetchError.unavailable(uri, 'the connection closed before the object was complete'));
  });
  // A consumer that stops early (break in for-await, destroy) releases the connection too.
  out.once('close', () => {
    signal.removeEventListener('abort', onAbort);
    if (!body.readableEnded) body.destroy();
  });
  body.pipe(out);
  return out;
}
