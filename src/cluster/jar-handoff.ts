import { randomUUID } from 'node:crypto';
import { copyFile, link, mkdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { slabFileStream } from '../artifacts/slab-pool';
import type { JobManagerClient } from './jobmanager-client';
import { MultipartJarBody } from './multipart-jar-body';
import { PipelinedUpload } from './pipelined-upload';

export type HandoffMode = 'upload' | 'shared-dir';

export interface HandedOffJar {
  jarId: string;
  /** The `filename` Flink's upload would have answered (absolute JobManager path). */
  filename: string;
  /** Deletes the jar from the JobManager; never throws. */
  release(): Promise<void>;
}

/**
 * Gives a local jar to the JobManager. `shared-dir` hard-links it into the JobManager's jar
 * directory (<web.upload.dir>/flink-web-upload) — no second copy of the bytes; `upload` streams it
 * to /v1/jars/upload like any client. Either way the JobManager stays the source of truth.
 */
export class JarHandoff {
  constructor(
    readonly mode: HandoffMode,
    private readonly cluster: JobManagerClient,
    private readonly uploadDir: string | undefined,
    private readonly log: Logger,
  ) {}

  async handOff(path: string, name: string): Promise<HandedOffJar> {
    return this.mode === 'shared-dir' ? this.link(path, name) : this.upload(path, name);
  }

  /**
   * An upload hand-off fed while the jar downloads (ADR 0008). Upload mode only: in shared-dir mode
   * the hand-off is a hard link of the finished file, and there is nothing to overlap.
   */
  pipelined(name: string): PipelinedUpload<HandedOffJar> {
    if (this.mode !== 'upload') throw new Error('a pipelined hand-off needs gateway.artifacts.handoff: upload');
    return new PipelinedUpload<HandedOffJar>(name, (body) => this.send(body));
  }

  private async link(path: string, name: string): Promise<HandedOffJar> {
    const jarDir = join(this.uploadDir!, 'flink-web-upload');
    await mkdir(jarDir, { recursive: true });
    const jarId = `${randomUUID()}_${name}`;
    const target = join(jarDir, jarId);
    try {
      await link(path, target);
    } catch (err) {
      // Different filesystems (EXDEV) or no hard links: fall back to a copy.
      this.log.warn({ code: (err as NodeJS.ErrnoException).code }, 'hard link into the JobManager jar directory failed; copying');
      await copyFile(path, target);
    }
    return { jarId, filename: target, release: () => this.remove(jarId, target) };
  }

  private async upload(path: string, name: string): Promise<HandedOffJar> {
    const body = new MultipartJarBody(name);
    // Read from disk only once a JobManager connection takes the body: a hand-off waiting for one
    // of the client's connections must not hold jar bytes (RSS grew with the requests in flight).
    body.feedWhenRead(() => {
      // In pooled slabs the upload gives back as it sends them: a few MiB for a jar of any size.
      const file = slabFileStream(path);
      file.once('end', () => body.complete());
      file.once('error', (err) => body.abandon(err));
      return file;
    });
    return this.send(body);
  }

  /** Uploads one multipart body; the caller completes or abandons it. */
  private async send(body: MultipartJarBody): Promise<HandedOffJar> {
    const res = await this.cluster.upload(body.stream, body.contentType);
    if (res.status !== 200) throw this.cluster.failure('upload', res);
    const filename = String((res.body as { filename?: unknown }).filename ?? '');
    const jarId = filename.substring(filename.lastIndexOf('/') + 1);
    return { jarId, filename, release: () => this.remove(jarId) };
  }

  private async remove(jarId: string, localPath?: string): Promise<void> {
    try {
      const r = await this.cluster.json('DELETE', `/v1/jars/${encodeURIComponent(jarId)}`, { operation: 'delete transient jar' });
      if (r.status !== 200 && r.status !== 400) this.log.warn({ jarId, status: r.status }, 'could not delete a transient jar from the JobManager');
    } catch (err) {
      this.log.warn({ jarId, err: (err as Error).message }, 'could not delete a transient jar from the JobManager');
    }
    if (localPath) await unlink(localPath).catch(() => undefined);
  }
}
