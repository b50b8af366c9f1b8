import type { Logger } from 'pino';
import type { ArtifactFetcher } from '../artifacts/artifact-fetcher';
import { jarEntryPoints } from '../artifacts/jar-entry-points';
import type { HandedOffJar, JarHandoff } from '../cluster/jar-handoff';
import type { PipelinedUpload } from '../cluster/pipelined-upload';
import type { AuditSubject } from '../audit/audit-log';
import type { PreparedJar, RemoteJarSource } from './run-service';

/**
 * The remote-jar seam of the run pipeline: fetch (policy, cache, verify) → hand the jar to the
 * JobManager → provenance for the forwarded configuration. The cached blob stays held until the
 * transient jar is released. With the upload hand-off, the request that starts a download also
 * streams it to the JobManager as it arrives, and completes that upload only once the fetch has
 * passed every check (ADR 0008); every other case hands the cached file off afterwards.
 */
export class RemoteJars implements RemoteJarSource {
  constructor(private readonly fetcher: ArtifactFetcher, private readonly handoff: JarHandoff) {}

  async prepare(uri: string, ctx: { jobId?: string; sha256?: string; log: Logger; audit?: AuditSubject }): Promise<PreparedJar> {
    const pipe: { upload?: PipelinedUpload } = {};
    const jar = await this.fetcher
      .fetch(uri, {
        ...(ctx.sha256 !== undefined ? { sha256: ctx.sha256 } : {}),
        log: ctx.log,
        ...(ctx.audit ? { audit: { ...ctx.audit, ...(ctx.jobId ? { jobId: ctx.jobId } : {}) } } : {}),
        ...(this.handoff.mode === 'upload' ? { tap: (name: string) => (pipe.upload = this.handoff.pipelined(name)) } : {}),
      })
      .catch((err: unknown) => {
        // A download, size, checksum, pin or zip failure: the upload is never completed.
        pipe.upload?.abort(err instanceof Error ? err : new Error(String(err)));
        throw err;
      });
    let handed: HandedOffJar | undefined;
    let pipelined = false;
    try {
      if (jar.tapped) {
        handed = await pipe.upload!.complete();
        pipelined = handed !== undefined;
      } else pipe.upload?.abort(new Error('the download that fed the upload was retried'));
      // Not pipelined (cached, shared with another request, retried) or the upload ended early.
      handed ??= await this.handoff.handOff(jar.path, jar.name);
    } catch (err) {
      jar.release();
      throw err;
    }
    ctx.log.info({ jarId: handed.jarId, sha256: jar.sha256, fromCache: jar.fromCache, handoff: this.handoff.mode, pipelined }, 'remote jar handed to the JobManager');
    return {
      jarId: handed.jarId,
      filename: handed.filename,
      provenance: {
        'gateway.artifact.uri': jar.uri,
        'gateway.artifact.sha256': jar.sha256,
        ...(jar.version !== undefined ? { 'gateway.artifact.version': jar.version } : {}),
      },
      artifact: { uri: jar.uri, sha256: jar.sha256, size: jar.size, ...(jar.version !== undefined ? { version: jar.version } : {}), verdicts: jar.verdicts },
      entryPoints: () => jarEntryPoints(jar.path),
      detach: () => jar.release(),
      release: async () => {
        try {
          await handed.release();
        } finally {
          jar.release();
        }
      },
    };
  }
}
