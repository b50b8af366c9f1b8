import { setFlagsFromString } from 'node:v8';

/**
 * The one V8 flag the gateway process sets for itself (ADR 0018), first thing in `main`.
 *
 * Every body chunk Node's HTTP parser hands over is a fresh Buffer whose bytes live outside V8's
 * heap. Without this flag V8 keeps a separate limit for such external memory, a few tens of MB past
 * what was live at the last full collection; each time an upload or download passes it, V8 runs a
 * full mark-compact of the whole heap, so a gateway moving 1 GiB ran about 40 of them — measured,
 * over half of its CPU for a jar upload, most of it on V8's helper threads. With the flag, external
 * bytes count towards V8's global limit, which grows with the heap like every other allocation.
 * Peak memory stays within the bound the bench measures (`memory.rss-growth.1GiB`).
 *
 * The flag is V8's own (`node --v8-options`); Node does not accept it in NODE_OPTIONS, so it is set
 * here rather than on a command line. A V8 that no longer knows it ignores it with a warning on
 * stderr, and the gateway behaves as before.
 */
export const V8_FLAGS = ['--external-memory-accounted-in-global-limit'] as const;

export function tuneV8(): void {
  for (const flag of V8_FLAGS) setFlagsFromString(flag);
}
