import type { Logger } from 'pino';
import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import type { ArtifactFetcher, FetchedJar } from '../artifacts/artifact-fetcher';
import type { JarCache } from '../artifacts/jar-cache';
import { libName, nestArtifacts } from '../artifacts/nested-jar';
import { type JarEntryPoints, jarEntryPoints } from '../artifacts/jar-entry-points';
import type { HandedOffJar, JarHandoff } from '../cluster/jar-handoff';
import type { PipelinedUpload } from '../cluster/pipelined-upload';
import type { AuditSubject, Verdicts } from '../audit/audit-log';

/** What was fetched, for the audit log. */
export interface ArtifactFacts {
  uri: string;
  sha256: string;
  size: number;
  version?: string;
  verdicts: Verdicts;
}

/** A jar fetched by URI and handed to the JobManager, held until released. */
export interface PreparedJar {
  jarId: string;
  /** Absolute JobManager path, as Flink's upload answers it. */
  filename: string;
  /** Keys added to the forwarded configuration, e.g. gateway.artifact.{uri,sha256,version}. */
  provenance: Record<string, string>;
  artifact: ArtifactFacts;
  /** The jar's classes and manifest entry class (read from the local copy while it is held). */
  entryPoints(): Promise<JarEntryPoints>;
  /** Removes the transient jar from the JobManager; never throws. */
  release(): Promise<void>;
  /** Keeps the jar on the JobManager (POST /jars/fetch) and only frees the local cache hold. */
  detach(): void;
}

/** What one `prepare` call carries. */
export interface PrepareContext {
  jobId?: string;
  sha256?: string;
  artifacts?: readonly string[];
  log: Logger;
  audit?: AuditSubject;
  /**
   * The jar budget (jar-budget.ts): called with the size of the jar about to be handed off, after
   * the fetch and before the JobManager keeps anything; it throws (429) when the jar does not fit,
   * and then nothing is handed off.
   */
  charge?: (bytes: number) => void;
  /** A run's jar, deleted once its job is submitted: handed off under a name `GET /jars` does not list. */
  transient?: boolean;
}

/** The run pipeline's seam for remote jars (`user.artifacts.job-jar`): a URI in, a jar on the JobManager out. */
export interface RemoteJarSource {
  prepare(uri: string, ctx: PrepareContext): Promise<PreparedJar>;
}

/**
 * The remote-jar seam of the run pipeline: fetch (policy, cache, verify) → hand the jar to the
 * JobManager → provenance for the forwarded configuration. The cached blob stays held until the
 * transient jar is released. With the upload hand-off, the request that starts a download also
 * streams it to the JobManager as it arrives, and completes that upload only once the fetch has
 * passed every check (ADR 0008); every other case hands the cached file off afterwards.
 */
export class RemoteJars implements RemoteJarSource {
  constructor(
    private readonly fetcher: ArtifactFetcher,
    private readonly handoff: JarHandoff,
    private readonly cache: JarCache,
  ) {}

  async prepare(uri: string, ctx: PrepareContext): Promise<PreparedJar> {
    const artifacts = ctx.artifacts ?? [];
    // With artifacts the jar handed off is a new one (the job jar plus lib/ entries), so the
    // download cannot stream to the JobManager as it arrives.
    const pipe: { upload?: PipelinedUpload<HandedOffJar> } = {};
    const teed = this.handoff.mode === 'upload' && artifacts.length === 0;
    const jar = await this.fetcher
      .fetch(uri, {
        ...(ctx.sha256 !== undefined ? { sha256: ctx.sha256 } : {}),
        log: ctx.log,
        ...(ctx.audit ? { audit: { ...ctx.audit, ...(ctx.jobId ? { jobId: ctx.jobId } : {}) } } : {}),
        ...(teed ? { tee: (name: string) => (pipe.upload = this.handoff.pipelined(name)) } : {}),
      })
      .catch((err: unknown) => {
        // A download, size, checksum, pin or zip failure: the upload is never completed.
        pipe.upload?.destroy(err instanceof Error ? err : new Error(String(err)));
        throw err;
      });
    let handed: HandedOffJar | undefined;
    let pipelined = false;
    const libs: FetchedJar[] = [];
    let nested: { path: string; sha256: string; release: () => void } | undefined;
    const releaseAll = () => {
      nested?.release();
      for (const l of libs) l.release();
      jar.release();
    };
    try {
      if (artifacts.length > 0) {
        // Each artifact through the same plugins, policy, allow-list, cache and limits as the job jar.
        for (const a of artifacts) {
          libs.push(
            await this.fetcher.fetch(a, {
              log: ctx.log,
              ...(ctx.audit ? { audit: { ...ctx.audit, ...(ctx.jobId ? { jobId: ctx.jobId } : {}) } } : {}),
            }),
          );
        }
        const names = libs.map((l, i) => libName(i, new URL(l.uri).pathname));
        const key = createHash('sha256')
          .update(JSON.stringify([jar.sha256, libs.map((l, i) => [l.sha256, names[i]])]))
          .digest('hex');
        nested = await this.cache.derived(`nested-${key}`, (tmp) =>
          nestArtifacts(
            jar.path,
            libs.map((l, i) => ({ path: l.path, name: names[i]! })),
            tmp,
          ),
        );
      }
      try {
        ctx.charge?.(nested ? (await stat(nested.path)).size : jar.size);
      } catch (err) {
        // Over the budget: a pipelined upload is never completed, so the JobManager keeps nothing.
        pipe.upload?.destroy(err instanceof Error ? err : new Error(String(err)));
        throw err;
      }
      if (jar.teed) {
        handed = await pipe.upload!.complete();
        pipelined = handed !== undefined;
      } else pipe.upload?.destroy(new Error('the download that fed the upload was retried'));
      // Not pipelined (cached, shared with another request, retried) or the upload ended early.
      handed ??= await this.handoff.handOff(nested?.path ?? jar.path, jar.name, 'jar hand-off', ctx.transient === true);
    } catch (err) {
      releaseAll();
      throw err;
    }
    ctx.log.info(
      { jarId: handed.jarId, sha256: jar.sha256, fromCache: jar.fromCache, handoff: this.handoff.mode, pipelined },
      'remote jar handed to the JobManager',
    );
    return {
      jarId: handed.jarId,
      filename: handed.filename,
      provenance: {
        'gateway.artifact.uri': jar.uri,
        'gateway.artifact.sha256': jar.sha256,
        ...(jar.version !== undefined ? { 'gateway.artifact.version': jar.version } : {}),
        ...(libs.length > 0 ? { 'gateway.artifact.artifacts': libs.map((l) => `${l.uri}@sha256:${l.sha256}`).join(';') } : {}),
      },
      artifact: {
        uri: jar.uri,
        sha256: jar.sha256,
        size: jar.size,
        ...(jar.version !== undefined ? { version: jar.version } : {}),
        verdicts: jar.verdicts,
      },
      entryPoints: () => jarEntryPoints(nested?.path ?? jar.path),
      detach: releaseAll,
      release: async () => {
        try {
          await handed.release();
        } finally {
          releaseAll();
        }
      },
    };
  }
}
