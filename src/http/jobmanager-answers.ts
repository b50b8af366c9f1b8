import { pathViews } from './canonical-path';

/**
 * What a JobManager answer relayed by the pass-through can hold, by route (docs/security.md,
 * "What the JobManager's answers hold"):
 * - `configuration`: a configuration listing — `/jobmanager/config`, the per-job and (Flink 2.3)
 *   per-application `…/jobmanager/config` (both list the cluster's configuration), a job's
 *   execution configuration (`/jobs/:jobid/config`, with its user configuration), the JVM
 *   environment (`…/jobmanager/environment`: JVM options with their `-D` properties) and
 *   `/jobs/:jobid/checkpoints/config`. Structured key/value answers: the gateway filters them with its
 *   own sensitivity rule on top of Flink's (`configuration-filter.ts`);
 * - `diagnostics`: what cannot be filtered — the JobManager's and TaskManagers' logs, log lists,
 *   log files, stdout, thread dumps, profiler runs and their results, flame graphs. Logs print the
 *   whole start-up configuration (redacted by Flink's word list only) and every job's output, so
 *   these need `gateway.auth.permission.logs` on top of what their method needs;
 * - `state`: everything else — job and cluster state a `read` principal sees as Flink shows it.
 *
 * Decided by segment, not by a list of Flink's routes, so that a route a later Flink adds under the
 * same names (another `…/config`, another log file route) falls into its class without a change here.
 */
export type AnswerClass = 'configuration' | 'diagnostics' | 'state';

/** Path segments that name logs, stdout, stack samples or profiles, wherever they appear. */
const DIAGNOSTIC_SEGMENTS = new Set(['log', 'logs', 'stdout', 'thread-dump', 'profiler', 'flamegraph']);
/** Last segments of configuration listings (`GET /config`, the dashboard's settings, is not one). */
const CONFIGURATION_SEGMENTS = new Set(['config', 'environment']);

/** The class of one view of a path (segments after an optional `v1`; empty segments ignored). */
export function answerClassOfSegments(segments: readonly string[]): AnswerClass {
  const t = segments.filter(Boolean).map((s) => s.toLowerCase());
  const rest = t[0] === 'v1' ? t.slice(1) : t;
  // The gateway's own routes and the jar routes it owns answer from the gateway.
  if (rest[0] === 'gateway' || rest[0] === 'jars') return 'state';
  if (rest.some((s) => DIAGNOSTIC_SEGMENTS.has(s))) return 'diagnostics';
  if (rest.length >= 2 && CONFIGURATION_SEGMENTS.has(rest[rest.length - 1]!)) return 'configuration';
  return 'state';
}

/**
 * The classes of a raw path (without its query), on both views the gateway decides on (exactly
 * Flink's router's, and decoded until stable): a path whose views differ gets both classes, so no
 * spelling escapes a filter or a permission. A path with no single meaning is refused before this
 * (`pathGuard`); should one get here, it counts as both.
 */
export function answerClassesOf(rawPath: string): Set<AnswerClass> {
  const views = pathViews(rawPath);
  if (!views.ok) return new Set(['configuration', 'diagnostics']);
  return new Set([views.flink, views.canonical].map(answerClassOfSegments));
}
