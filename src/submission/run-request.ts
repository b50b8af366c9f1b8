import { GatewayError } from '../errors/gateway-error';

export const JOB_JAR_KEY = 'user.artifacts.job-jar';
/** Optional SHA-256 pin of the job jar: a mismatch fails the run before anything starts. */
export const JOB_JAR_SHA256_KEY = 'user.artifacts.job-jar.sha256';
const HEX32 = /^[0-9a-fA-F]{32}$/;
const CLAIM_MODES = ['CLAIM', 'NO_CLAIM', 'LEGACY'];

/**
 * A run or plan request body, validated with Flink's rules (JarRunRequestBody /
 * JarPlanRequestBody). Unknown fields are kept and forwarded: Flink ignores them, and a newer
 * Flink may understand them.
 */
export interface JarRequest {
  /** Lower-case 32-hex job id, if the client gave one. */
  jobId?: string;
  flinkConfiguration: Record<string, string>;
  /** The body as it will be forwarded (validated fields normalised). */
  body: Record<string, unknown>;
}

export function parseJarRequest(raw: Record<string, unknown>, typeName: 'JarRunRequestBody' | 'JarPlanRequestBody'): JarRequest {
  const bad = (reason: string): never => {
    throw new GatewayError('GW_REQUEST_MALFORMED', { type: typeName, reason });
  };
  const body: Record<string, unknown> = { ...raw };
  const optString = (name: string) => {
    const v = body[name];
    if (v !== undefined && v !== null && typeof v !== 'string') bad(`${name} must be a string`);
  };
  optString('entryClass');
  optString('savepointPath');
  optString('programArgs');
  const args = body.programArgsList;
  if (args !== undefined && args !== null && (!Array.isArray(args) || args.some((a) => typeof a !== 'string'))) {
    bad('programArgsList must be an array of strings');
  }
  const p = body.parallelism;
  if (p !== undefined && p !== null) {
    // Jackson coerces numeric strings; the Web UI sends "parallelism":"4".
    const n = typeof p === 'string' && /^-?\d+$/.test(p.trim()) ? Number(p) : p;
    if (typeof n !== 'number' || !Number.isInteger(n) || n > 2 ** 31 - 1 || n < -(2 ** 31)) bad('parallelism must be an integer');
    body.parallelism = n;
  }
  const anrs = body.allowNonRestoredState;
  if (anrs !== undefined && anrs !== null) {
    if (anrs === 'true' || anrs === 'false') body.allowNonRestoredState = anrs === 'true';
    else if (typeof anrs !== 'boolean') bad('allowNonRestoredState must be true or false');
  }
  for (const name of ['claimMode', 'restoreMode']) {
    const v = body[name];
    if (v !== undefined && v !== null && (typeof v !== 'string' || !CLAIM_MODES.includes(v))) bad(`${name} must be one of ${CLAIM_MODES.join(', ')}`);
  }
  let jobId: string | undefined;
  const j = body.jobId;
  if (j !== undefined && j !== null) {
    if (typeof j !== 'string' || !HEX32.test(j)) bad('jobId must be 32 hexadecimal characters, e.g. 3f0c7c9a8f2e4d1b9a6e5c4b3a2f1e0d');
    jobId = (j as string).toLowerCase();
    body.jobId = jobId;
  }
  const flinkConfiguration: Record<string, string> = {};
  const fc = body.flinkConfiguration;
  if (fc !== undefined && fc !== null) {
    if (typeof fc !== 'object' || Array.isArray(fc)) bad('flinkConfiguration must be an object of string values');
    for (const [k, v] of Object.entries(fc as Record<string, unknown>)) {
      if (v === null) continue;
      // Jackson turns scalars into strings for Map<String, String>; objects and arrays are refused.
      if (typeof v === 'object') bad(`flinkConfiguration value of '${k}' must be a string`);
      flinkConfiguration[k] = String(v);
    }
    body.flinkConfiguration = flinkConfiguration;
  }
  return { ...(jobId !== undefined ? { jobId } : {}), flinkConfiguration, body };
}
