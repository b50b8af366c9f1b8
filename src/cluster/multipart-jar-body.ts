import { randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';

/**
 * The body of a one-file multipart upload to the JobManager, written incrementally. The closing
 * boundary is written only by `complete()`: until then the JobManager cannot consider the file
 * received, so `abandon()` (after a failed check) guarantees that nothing is kept there.
 *
 * Hand-written rather than a form-data library: a single streamed part is a few lines, and the
 * libraries buffer or need a known length.
 */
export class MultipartJarBody {
  readonly boundary = `----flink-jar-gateway-${randomBytes(12).toString('hex')}`;
  readonly stream = new PassThrough({ highWaterMark: 1024 * 1024 });

  constructor(fileName: string) {
    const safeName = fileName.replace(/["\r\n\\]/g, '_');
    this.stream.write(
      `--${this.boundary}\r\n` +
        `Content-Disposition: form-data; name="jarfile"; filename="${safeName}"\r\n` +
        'Content-Type: application/java-archive\r\n\r\n',
    );
  }

  get contentType(): string {
    return `multipart/form-data; boundary=${this.boundary}`;
  }

  /** Pipes the file bytes in (backpressure-aware) without ending the multipart body. */
  feed(source: Readable): void {
    source.pipe(this.stream, { end: false });
  }

  /**
   * Like `feed`, but opens the source only when a consumer starts reading the body (`whenRead`). A request still queued for a connection then holds no file bytes; fed at
   * once, each held its buffers full (~2 MiB), so memory grew with the number of queued requests.
   */
  feedWhenRead(open: () => Readable): void {
    void this.whenRead().then(() => {
      // Destroyed before anyone read it (the request failed or was aborted): nothing to open.
      if (!this.stream.destroyed) this.feed(open());
    });
  }

  /**
   * Resolves once a consumer starts reading the body (as for `feedWhenRead`), or once the body is
   * destroyed. A producer that pushes (a download, ADR 0008) waits for it, so an upload still
   * queued for a JobManager connection holds no jar bytes.
   */
  whenRead(): Promise<void> {
    return new Promise((resolve) => {
      const onListener = (event: string | symbol) => {
        if (event !== 'data' && event !== 'readable') return;
        done();
      };
      const done = () => {
        this.stream.off('newListener', onListener);
        this.stream.off('close', done);
        resolve();
      };
      if (this.stream.destroyed || this.stream.listenerCount('data') > 0 || this.stream.listenerCount('readable') > 0) return resolve();
      this.stream.on('newListener', onListener);
      this.stream.once('close', done);
    });
  }

  complete(): void {
    this.stream.end(`\r\n--${this.boundary}--\r\n`);
  }

  abandon(reason: Error): void {
    this.stream.destroy(reason);
  }
}
