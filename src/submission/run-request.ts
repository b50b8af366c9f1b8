import { GatewayError } from '../errors/gateway-error';

export const JOB_JAR_KEY = 'user.artifacts.job-jar';
/** Optional SHA-256 pin of the job jar: a mismatch fails the run before anything starts. */
export const JOB_JAR_SHA256_KEY = 'gateway.artifacts.job-jar.sha256';
/** Its name before the gateway moved its own keys out of Flink's user.artifacts.* namespace. */
export const DEPRECATED_JOB_JAR_SHA256_KEY = 'user.artifacts.job-jar.sha256';

/** The request's SHA-256 pin of its job jar, under its key or (when that is absent) its deprecated key. */
export function jobJarPin(flinkConfiguration: Readonly<Record<string, string>>): string | undefined {
  return flinkConfiguration[JOB_JAR_SHA256_KEY] ?? flinkConfiguration[DEPRECATED_JOB_JAR_SHA256_KEY];
}
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

export function parseJarRequest(
  raw: Record<string, unknown>,
  typeName: 'JarRunRequestBody' | 'JarPlanRequestBody' | 'JarRunApplicationRequestBody',
): JarRequest {
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
  // Lenient the way Flink's Jackson is (checked against Flink 2.1's run and plan handlers):
  // parallelism takes numeric strings (the Web UI sends "4"), "" as unset (its cleared field) and
  // truncates fractions (4.5 → 4), but no "4.5" and no boolean; allowNonRestoredState takes
  // "true"/"false" in any case, "" as unset and integers (0 = false), but no "1", "yes" or 1.5.
  const p = body.parallelism;
  if (p === '') delete body.parallelism;
  else if (p !== undefined && p !== null) {
    const n =
      typeof p === 'string' && /^\s*-?\d+\s*$/.test(p)
        ? Number(p)
        : typeof p === 'number' && Number.isFinite(p)
          ? Math.trunc(p)
          : Number.NaN;
    if (!Number.isInteger(n) || n > 2 ** 31 - 1 || n < -(2 ** 31)) bad('parallelism must be an integer');
    body.parallelism = n;
  }
  const anrs = body.allowNonRestoredState;
  if (anrs === '') delete body.allowNonRestoredState;
  else if (anrs !== undefined && anrs !== null) {
    if (typeof anrs === 'string' && /^(true|false)$/i.test(anrs)) body.allowNonRestoredState = anrs.toLowerCase() === 'true';
    else if (typeof anrs === 'number' && Number.isInteger(anrs)) body.allowNonRestoredState = anrs !== 0;
    else if (typeof anrs !== 'boolean') bad('allowNonRestoredState must be true or false');
  }
  for (const name of ['claimMode', 'restoreMode']) {
    const v = body[name];
    if (v !== undefined && v !== null && (typeof v !== 'string' || !CLAIM_MODES.includes(v)))
      bad(`${name} must be one of ${CLAIM_MODES.join(', ')}`);
  }
  // Flink 2.3's JarRunApplicationRequestBody: an ApplicationID, 32 hex like a JobID.
  const a = body.applicationId;
  if (a !== undefined && a !== null) {
    if (typeof a !== 'string' || !HEX32.test(a)) bad('applicationId must be 32 hexadecimal characters');
    body.applicationId = (a as string).toLowerCase();
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
