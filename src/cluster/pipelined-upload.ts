import { Writable } from 'node:stream';
import { slabPool } from '../download/slab-pool';
import { whenRoom } from '../stream-room';
import { MultipartJarBody } from './multipart-jar-body';

/** What an upload gives back: something on the JobManager that can be removed again. */
interface Releasable {
  release(): Promise<void>;
}

/**
 * An upload hand-off fed while the jar is still downloading (ADR 0008), as an ordinary `Writable`:
 * the download tees its bytes into it. The first chunk starts the upload to the JobManager, and each
 * chunk is passed on only once a JobManager connection reads the body and has room for it, so the
 * slower of the disk and the JobManager sets the pace and a queued upload holds no jar bytes. The
 * multipart body is completed only by `complete()`, which the caller invokes after the fetch passed
 * every check (size, store checksum, pin, zip structure); `destroy()` abandons it, so Flink's
 * decoder never sees a whole file and keeps nothing (ADR 0002).
 */
export class PipelinedUpload<T extends Releasable> extends Writable {
  private body?: MultipartJarBody;
  private reading?: Promise<void>;
  /** A JobManager connection reads the body (or it was destroyed): chunks go straight in. */
  private flowing = false;
  private sent?: Promise<T>;
  /** The upload ended before `complete()`: failed, aborted, or answered an incomplete body. */
  private ended = false;
  private completed = false;

  constructor(
    private readonly name: string,
    private readonly send: (body: MultipartJarBody) => Promise<T>,
  ) {
    // Not destroyed when it finishes: `complete()` tells an ended upload from an abandoned one by that.
    super({ autoDestroy: false });
    // How the upload ended reaches the caller through `complete()` (or the fetch), not an event.
    this.on('error', () => undefined);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    const body = this.open();
    if (!this.flowing) {
      void this.reading!.then(() => {
        this.flowing = true;
        this._write(chunk, _encoding, done);
      });
      return;
    }
    const stream = body.stream;
    // A failed or aborted upload drops the bytes (and gives back its hold on a pooled slab); the
    // download goes on for the cache, and `complete()` tells the caller to hand off from there.
    if (stream.destroyed) {
      slabPool.recycle(chunk);
      done();
      return;
    }
    // The body passes the chunk on as it is; the JobManager upload gives it back once sent.
    if (stream.write(chunk)) {
      done();
      return;
    }
    whenRoom(stream, () => done());
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    this.body?.abandon(error ?? new Error('the pipelined upload was abandoned'));
    done(error);
  }

  /**
   * Call only after the fetch passed every check and every byte of the jar was written: waits for
   * the written bytes to reach the body, writes the closing boundary and resolves with the jar on
   * the JobManager (or its error). Resolves undefined when the upload did not live until then
   * (never started, destroyed, or the JobManager connection failed); the caller then hands the jar
   * off from the cache.
   */
  async complete(): Promise<T | undefined> {
    if (!this.body || !this.sent) return undefined;
    // Every chunk the download wrote must be in the body before its closing boundary.
    if (!this.destroyed) await new Promise<void>((resolve) => this.end(() => resolve()));
    if (this.ended || this.destroyed || this.body.stream.destroyed) {
      this.body.abandon(new Error('the pipelined upload ended early'));
      // An answer to an incomplete body is never used; a jar it names (no JobManager should) goes.
      const early = await this.sent.catch(() => undefined);
      await early?.release();
      return undefined;
    }
    this.completed = true;
    this.body.complete();
    return this.sent;
  }

  private open(): MultipartJarBody {
    if (this.body) return this.body;
    const body = new MultipartJarBody(this.name);
    this.body = body;
    // The reason of an abort reaches the caller through the fetch (or `sent`), not as an 'error'
    // event: once the client has let go of the body, nothing else would listen for one.
    body.stream.on('error', () => undefined);
    this.reading = body.whenRead();
    this.sent = this.send(body);
    const early = (reason: Error) => {
      if (this.completed) return;
      this.ended = true;
      // Stops the writes waiting for room: the download must not wait for an upload that is over.
      body.abandon(reason);
    };
    this.sent.then(
      () => early(new Error('the JobManager answered before the jar was complete')),
      (err: unknown) => early(err instanceof Error ? err : new Error(String(err))),
    );
    return body;
  }
}
