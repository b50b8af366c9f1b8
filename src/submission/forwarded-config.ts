/**
 * Which keys of a run or plan request's `flinkConfiguration` reach the JobManager: a decision per
 * key family, made before anything is registered or forwarded (docs/security.md, "Forwarded
 * configuration"). Keys are dropped, never refused: the operator resends the cluster's whole merged
 * configuration with every run, so a refusal would fail every operator run on a cluster whose own
 * configuration sets such a key (e.g. `classloader.parent-first-patterns.additional`, which this
 * project's token bridge recommends) — and the cluster's own value applies on the JobManager anyway.
 */

/** A family of keys: an exact key, or a prefix ending in '.'. */
type Family = string;

/** Dropped in every policy mode: the gateway's own namespaces, which only the gateway writes. */
const ALWAYS_DROPPED: readonly Family[] = [
  // The gateway's remote-jar keys: decided from its own configuration, never forwarded (a Flink that
  // honours user.artifacts.* must not fetch a second time, with the JobManager's network and rights).
  'user.artifacts.',
  // Provenance (gateway.artifact.*) and the gateway's settings: written by the gateway alone.
  'gateway.',
];

/**
 * Dropped in `fetched-only` mode, which promises that only vetted jars run: keys that make Flink load
 * code or classes from somewhere else than the fetched jar (extra classpath URLs the JobManager
 * fetches itself, past the allow-list and the SSRF guard; Python files and interpreters; class-loading
 * order that would let a jar's classes shadow Flink's or the reverse).
 */
const CODE_LOADING: readonly Family[] = ['pipeline.classpaths', 'pipeline.jars', 'pipeline.cached-files', 'classloader.', 'python.'];

/** Flink's internal keys are not a client's to set, except the job id Flink 2.x reads from the configuration. */
const INTERNAL = '$internal.';
const KEPT_INTERNAL = new Set(['$internal.pipeline.job-id']);

export const PIPELINE_JOB_ID_KEY = '$internal.pipeline.job-id';

function inFamily(key: string, families: readonly Family[]): boolean {
  return families.some((f) => (f.endsWith('.') ? key.startsWith(f) : key === f));
}

export interface ForwardedConfiguration {
  config: Record<string, string>;
  /** Keys taken out, in request order (for the audit record). */
  dropped: string[];
}

/** The configuration to forward for `requested`, under `policyMode`. */
export function forwardedConfiguration(
  requested: Readonly<Record<string, string>>,
  policyMode: 'open' | 'fetched-only',
): ForwardedConfiguration {
  const config: Record<string, string> = {};
  const dropped: string[] = [];
  for (const [key, value] of Object.entries(requested)) {
    const drop =
      inFamily(key, ALWAYS_DROPPED) ||
      (key.startsWith(INTERNAL) && !KEPT_INTERNAL.has(key)) ||
      (policyMode === 'fetched-only' && inFamily(key, CODE_LOADING));
    if (drop) dropped.push(key);
    else config[key] = value;
  }
  return { config, dropped };
}

/** A bounded, audit-friendly description of the dropped keys. */
export function describeDropped(dropped: readonly string[]): string {
  const shown = dropped.slice(0, 20).map((k) => k.slice(0, 120));
  return `dropped ${shown.join(', ')}${dropped.length > shown.length ? ` and ${dropped.length - shown.length} more` : ''}`;
}
