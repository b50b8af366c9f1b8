import { randomUUID } from 'node:crypto';
import { copyFile, link, mkdir, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { slabFileStream } from '../download/slab-pool';
import { GatewayError } from '../errors/gateway-error';
import type { JobManagerClient } from './jobmanager-client';
import { MultipartJarBody } from './multipart-jar-body';
import { PipelinedUpload } from './pipelined-upload';

export type HandoffMode = 'upload' | 'shared-dir';

/** Attempts to delete a transient jar before the gateway gives up and logs it (a JobManager busy or restarting for a moment). */
const DELETE_ATTEMPTS = 3;

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
    /** Wait before the second attempt to delete a transient jar; doubled for each later one. */
    private readonly deleteBackoffMs = 250,
  ) {}

  /**
   * `operation` names the call in an error (the client's upload, or the hand-off of a fetched jar).
   * A `transient` jar (a run's, deleted once its job is submitted) is linked, in shared-dir mode,
   * under a name `GET /jars` does not list (Flink lists only `<id>_<name>.jar`), so the Web UI and
   * other callers never see, run or delete it; an uploaded one is named by the JobManager.
   */
  async handOff(path: string, name: string, operation = 'jar hand-off', transient = false): Promise<HandedOffJar> {
    return this.mode === 'shared-dir' ? this.link(path, name, operation, transient) : this.upload(path, name);
  }

  /**
   * An upload hand-off fed while the jar downloads (ADR 0008). Upload mode only: in shared-dir mode
   * the hand-off is a hard link of the finished file, and there is nothing to overlap.
   */
  pipelined(name: string): PipelinedUpload<HandedOffJar> {
    if (this.mode !== 'upload') throw new Error('a pipelined hand-off needs gateway.artifacts.handoff: upload');
    return new PipelinedUpload<HandedOffJar>(name, (body) => this.send(body));
  }

  /**
   * Hard-links `path` into the JobManager's jar directory under a new jar id. A JobManager that
   * takes no jars over REST (`web.submit.enable: false`) would refuse an upload of it, so it gets
   * no linked jar either. The copy that stands in for a link that cannot be made is written under
   * a name Flink does not list (it lists `*.jar`) and renamed, so the JobManager never sees part
   * of a jar.
   */
  private async link(path: string, name: string, operation: string, transient: boolean): Promise<HandedOffJar> {
    await this.checkAcceptsJars(operation);
    const jarDir = join(this.uploadDir!, 'flink-web-upload');
    await mkdir(jarDir, { recursive: true });
    // Flink's JarListHandler skips a file name without '_'; its run handler opens any name.
    const jarId = transient ? `${randomUUID()}.jar` : `${randomUUID()}_${name}`;
    const target = join(jarDir, jarId);
    try {
      await link(path, target);
    } catch (err) {
      // Different filesystems (EXDEV) or no hard links: fall back to a copy.
      this.log.warn({ code: (err as NodeJS.ErrnoException).code }, 'hard link into the JobManager jar directory failed; copying');
      const part = join(jarDir, `.${jarId}.part`);
      try {
        await copyFile(path, part);
        await rename(part, target);
      } catch (copyErr) {
        await unlink(part).catch(() => undefined);
        throw copyErr;
      }
    }
    return { jarId, filename: target, release: () => this.remove(jarId, target) };
  }

  /**
   * Reads the JobManager's dashboard configuration: `features.web-submit` is its
   * `web.submit.enable`. An answer without it is left to the calls that follow.
   */
  private async checkAcceptsJars(operation: string): Promise<void> {
    const r = await this.cluster.json('GET', '/v1/config', { operation });
    const features = (r.body as { features?: Record<string, unknown> } | undefined)?.features;
    if (r.status === 200 && features?.['web-submit'] === false) throw new GatewayError('GW_CLUSTER_SUBMIT_DISABLED', { operation });
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

  /**
   * Deletes a transient jar from the JobManager. A failure that may pass (no answer, a reset, a 5xx)
   * is tried again with backoff, so that a moment of JobManager load does not leave the jar on its
   * disk for good; 400 means Flink no longer has it. Never throws; a jar that could not be deleted
   * is logged with its id.
   */
  private async remove(jarId: string, localPath?: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      let problem: Record<string, unknown>;
      try {
        const r = await this.cluster.json('DELETE', `/v1/jars/${encodeURIComponent(jarId)}`, { operation: 'delete transient jar' });
        if (r.status === 200 || r.status === 400) break;
        problem = { status: r.status };
        if (r.status < 500) {
          this.log.warn({ jarId, ...problem }, 'could not delete a transient jar from the JobManager');
          break;
        }
      } catch (err) {
        problem = { err: (err as Error).message };
      }
      if (attempt >= DELETE_ATTEMPTS) {
        this.log.warn({ jarId, attempts: attempt, ...problem }, 'could not delete a transient jar from the JobManager');
        break;
      }
      this.log.info({ jarId, attempt, ...problem }, 'deleting a transient jar failed; trying again');
      await sleep(this.deleteBackoffMs * 2 ** (attempt - 1));
    }
    if (localPath) await unlink(localPath).catch(() => undefined);
  }
}
