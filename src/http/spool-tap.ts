import { createWriteStream, mkdtempSync, openSync, rmSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { FileDigest } from '../download/file-digest';
import { passedOnBodyBytes } from '../v8-tuning';

/**
 * Passes an upload through unchanged while writing a copy to a private temporary file (0600 in a
 * fresh 0700 directory), with backpressure from both sides. 'end' comes only once the copy is on
 * disk. `discard()` removes it.
 *
 * The copy's SHA-256 is computed on a helper thread from the file as it becomes durable (ADR 0035,
 * as for fetched jars): the request's thread only moves bytes.
 */
export class SpoolTap extends Transform {
  readonly path: string;
  private readonly dir: string;
  private readonly out: WriteStream;
  private readonly sha: FileDigest;
  private discarded = false;

  constructor(base: string) {
    super();
    this.dir = mkdtempSync(join(base, 'gw-upload-'));
    this.path = join(this.dir, 'upload.jar');
    // Opened here, so that the helper thread finds the file from its first message.
    const fd = openSync(this.path, 'wx', 0o600);
    this.out = createWriteStream(this.path, { fd, highWaterMark: 1024 * 1024 });
    this.sha = new FileDigest(this.path, 'sha256');
    this.out.on('error', (err) => {
      if (!this.discarded) this.destroy(err);
    });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    // What the file holds so far (bytesWritten counts completed writes only).
    this.sha.advance(this.out.bytesWritten);
    passedOnBodyBytes(chunk.length);
    if (this.out.write(chunk)) done(null, chunk);
    else this.out.once('drain', () => done(null, chunk));
  }

  override _flush(done: TransformCallback): void {
    this.out.end(() => done());
  }

  /** The copy's SHA-256 (after 'end'). */
  sha256(): Promise<string> {
    return this.sha.digest(this.out.bytesWritten);
  }

  discard(): void {
    if (this.discarded) return;
    this.discarded = true;
    this.sha.cancel();
    this.out.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
