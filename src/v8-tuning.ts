import { setFlagsFromString } from 'node:v8';

/**
 * The V8 flags the gateway process sets for itself (ADR 0018), first thing in `main`.
 *
 * Every body chunk Node's HTTP parser hands over is a fresh Buffer whose bytes live outside V8's
 * heap. Without these flags V8 keeps a separate limit for such external memory, a few tens of MB
 * past what was live at the last full collection; each time an upload or download passes it, V8
 * runs a full mark-compact of the whole heap, so a gateway moving 1 GiB ran about 40 of them —
 * measured, over half of its CPU for a jar upload, most of it on V8's helper threads.
 * - `--external-memory-accounted-in-global-limit`: external bytes count towards V8's global limit,
 *   which grows with the heap like every other allocation.
 * - `--heap-growing-percent=100`: that limit is twice what was live after the last full
 *   collection. V8's own factor sinks towards 1.1 for a small heap the gateway allocates quickly
 *   into, and after its heap had shrunk (a quiet spell after other work) an upload again ran a
 *   full collection every ~15 MB.
 * Peak memory moving a 1 GiB jar stays within the bound the bench measures
 * (`memory.rss-growth.1GiB`, worst 31.6 MiB with both).
 *
 * Both are V8's own flags (`node --v8-options`), read at every collection; Node does not accept them
 * in NODE_OPTIONS, so they are set here rather than on a command line. A V8 that no longer knows one
 * prints `Error: unrecognized flag` on stderr and goes on with its defaults.
 */
const V8_FLAGS = ['--external-memory-accounted-in-global-limit', '--heap-growing-percent=100'] as const;

export function tuneV8(): void {
  for (const flag of V8_FLAGS) setFlagsFromString(flag);
}
