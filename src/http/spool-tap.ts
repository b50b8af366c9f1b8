import { createWriteStream, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';

/**
 * Passes an upload through unchanged while writing a copy to a private temporary file (0600 in a
 * fresh 0700 directory), with backpressure from both sides. 'end' comes only once the copy is on
 * disk. `discard()` removes it.
 */
export class SpoolTap extends Transform {
  readonly path: string;
  private readonly dir: string;
  private readonly out: WriteStream;
  private discarded = false;

  constructor(base: string) {
    super();
    this.dir = mkdtempSync(join(base, 'gw-upload-'));
    this.path = join(this.dir, 'upload.jar');
    this.out = createWriteStream(this.path, { flags: 'wx', mode: 0o600, highWaterMark: 1024 * 1024 });
    this.out.on('error', (err) => {
      if (!this.discarded) this.destroy(err);
    });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.out.write(chunk)) done(null, chunk);
    else this.out.once('drain', () => done(null, chunk));
  }

  override _flush(done: TransformCallback): void {
    this.out.end(() => done());
  }

  discard(): void {
    if (this.discarded) return;
    this.discarded = true;
    this.out.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
