/**
 * The per-job addressing convention of token payloads. Flink distributes one container for the
 * whole cluster, so a provider that obtains tokens per job puts them inside its
 * own payload: a UTF-8 JSON object with a `jobs` object keyed by job id; its other top-level fields
 * (except `version`) are the provider's context for every job (an S3 region, an Azure endpoint).
 * Every built-in provider follows it (`{version: 1, ..., jobs: {<jobId>: {...}}}`), and so do the
 * Flink-side `GatewayTokens` and the file receiver. A payload that does not is delivered whole.
 */
export interface PerJobPayload {
  /** Job id → that job's entry. */
  jobs: Record<string, unknown>;
  /** The payload's other top-level fields, without `version` and `jobs`. */
  context: Record<string, unknown>;
}

/** Flink job ids (and the gateway's): 32 hex characters. Nothing else ever becomes a file name. */
export const JOB_ID = /^[0-9a-f]{32}$/;

/** The payload as per-job entries, or `undefined` when it does not follow the convention. */
export function parsePerJob(bytes: Uint8Array): PerJobPayload | undefined {
  const value = parseObject(bytes);
  if (!value) return undefined;
  const jobs = value['jobs'];
  if (typeof jobs !== 'object' || jobs === null || Array.isArray(jobs)) return undefined;
  const context: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (k !== 'jobs' && k !== 'version') context[k] = v;
  return { jobs: jobs as Record<string, unknown>, context };
}

/**
 * The payload without the entries of jobs `keep` refuses (a job unregistered meanwhile, whose
 * provider has not obtained again since). The same bytes when nothing is dropped or the payload
 * does not follow the convention.
 */
export function keepJobs(bytes: Uint8Array, keep: (jobId: string) => boolean): Uint8Array {
  const value = parseObject(bytes);
  const jobs = value?.['jobs'];
  if (!value || typeof jobs !== 'object' || jobs === null || Array.isArray(jobs)) return bytes;
  const kept = Object.entries(jobs as Record<string, unknown>).filter(([jobId]) => keep(jobId.toLowerCase()));
  if (kept.length === Object.keys(jobs).length) return bytes;
  return new TextEncoder().encode(JSON.stringify({ ...value, jobs: Object.fromEntries(kept) }));
}

function parseObject(bytes: Uint8Array): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(bytes).toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
