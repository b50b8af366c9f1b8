import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { JobGraphSummary } from '../submission/job-graph/job-graph-reader';
import { readLimited } from '../plugin-kit/provider-support';

/** What the pass-through needs for POST /v1/jobs (docs/adr/0010); `UnregisteredJobs` implements it. */
export interface JobGraphHook {
  /** A job graph submission begins; the returned function ends it. */
  beginJobGraph(): () => void;
  /**
   * Whether (and how large) job graphs are read so that their jobs are registered with their own
   * configuration before the JobManager gets them; undefined: they are not read.
   */
  readonly graphReading: { maxBytes: number } | undefined;
  /** The graph was read: register its job (rejects when a provider refuses; the body then never completes). */
  jobGraphRead(graph: JobGraphSummary, principal: string, log: Logger): Promise<void>;
  /**
   * The JobManager accepted it: a job whose graph was read (`read`) is now followed by the job
   * watcher; any other is registered with the cluster default scope (or refused, rejecting)
   * before the answer is relayed.
   */
  jobGraphAccepted(jobId: string, submittedBy: string, reqId: string, log: Logger, read?: JobGraphSummary): Promise<void>;
  /** A read graph's submission failed: the JobManager refused it, or (`ambiguous`) its outcome is unknown. */
  jobGraphFailed(read: JobGraphSummary, ambiguous: boolean, log: Logger): Promise<void>;
}

/** Flink's JobSubmitResponseBody is `{"jobUrl":"/jobs/<id>"}`: a few dozen bytes. */
const MAX_ANSWER = 64 * 1024;

/**
 * Reads the JobManager's answer to an accepted POST /v1/jobs and the job id it names. The body is
 * small and must be read whole anyway: the job is registered before the client learns of it, so
 * that a client (or the job itself, through the token bridge) never sees the job unregistered.
 * Undefined id: the answer names no job (then the job watcher finds it).
 */
export async function readJobGraphAnswer(upstream: Dispatcher.ResponseData): Promise<{ body: Buffer; jobId: string | undefined }> {
  const text = await readLimited(upstream.body, MAX_ANSWER);
  let jobId: string | undefined;
  try {
    const url = (JSON.parse(text) as { jobUrl?: unknown }).jobUrl;
    if (typeof url === 'string') jobId = /\/jobs\/([0-9a-fA-F]{32})\/?$/.exec(url)?.[1]?.toLowerCase();
  } catch {
    /* not JSON: relayed as it is */
  }
  return { body: Buffer.from(text, 'utf8'), jobId };
}
