import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { option, type OptionDef } from './config/types';

/** Whether the gateway tunes V8 for itself (ADR 0035). */
export const v8Options = {
  tuning: option({
    key: 'gateway.v8-tuning.enabled',
    type: 'boolean',
    default: true,
    section: 'Process',
    description:
      "At start-up, set V8's collection flags for a process that moves large bodies (`--external-memory-accounted-in-global-limit`, `--heap-growing-percent=100`) and run a young-generation collection every 16 MiB of upload and pass-through body chunks. Node refuses these flags in NODE_OPTIONS, so the gateway sets them with `v8.setFlagsFromString` before it builds anything; a flag already on node's command line is not set again. `false` leaves V8's defaults: a 1 GiB upload then grows the process by more than 64 MiB.",
  }),
} satisfies Record<string, OptionDef>;

/**
 * The V8 flags the gateway process sets for itself (ADR 0018, ADR 0035), in `main` once the
 * configuration is read and before anything is built, unless `gateway.v8-tuning.enabled` is false.
 *
 * Every body chunk Node's HTTP parser hands over is a fresh Buffer whose bytes live outside V8's
 * heap. Without these flags V8 keeps a separate limit for such external memory, a few tens of MB
 * past what was live at the last full collection; each time an upload or download passes it, V8
 * runs a full mark-compact of the whole heap, dozens per GiB moved: most of a jar upload's CPU, on
 * V8's helper threads (ADR 0018 has the figures).
 * - `--external-memory-accounted-in-global-limit`: external bytes count towards V8's global limit,
 *   which grows with the heap like every other allocation.
 * - `--heap-growing-percent=100`: that limit is twice what was live after the last full
 *   collection. V8's own factor sinks towards its minimum for a small heap the gateway allocates
 *   quickly into, and after its heap had shrunk (a quiet spell after other work) an upload again
 *   ran full collections at a short distance.
 * Peak memory moving a 1 GiB jar stays within the bound the bench measures (`memory.rss-growth.1GiB`).
 *
 * Both are V8's own flags (`node --v8-options`), read at every collection; Node does not accept them
 * in NODE_OPTIONS, so they are set here; one given on node's own command line (`node --heap-growing-percent=… bin/…`)
 * is left as given. A V8 that no longer knows one prints `Error: unrecognized flag` on stderr and goes
 * on with its defaults.
 */
const V8_FLAGS = ['--external-memory-accounted-in-global-limit', '--heap-growing-percent=100'] as const;

/**
 * Bytes of Node-allocated body chunks the gateway passes on between two young-generation
 * collections (ADR 0033).
 */
const YOUNG_GC_EVERY = 16 * 1024 * 1024;
let minorGc: (() => void) | undefined;
let sinceLastGc = 0;

export function tuneV8(execArgv: readonly string[] = process.execArgv): void {
  for (const flag of V8_FLAGS) {
    const name = flag.split('=')[0]!;
    if (!execArgv.some((a) => a === name || a.startsWith(`${name}=`))) setFlagsFromString(flag);
  }
  // V8's gc() with a type, taken from a context of its own while the flag is on, then the flag off
  // again: no context created later (and not the main one) sees a `gc` global.
  setFlagsFromString('--expose-gc');
  try {
    const gc = runInNewContext('gc') as ((options: { type: 'minor' }) => void) | undefined;
    if (typeof gc === 'function') minorGc = () => gc({ type: 'minor' });
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

/**
 * A path that moves a request's or an answer's body chunk by chunk says here how many bytes it has
 * passed on. Each chunk is a new Buffer from Node's parser, dead once passed on but freed only
 * when V8 collects; even with the flags above V8 let them pile up to its global limit before a full
 * collection, so a large upload grew the process past the memory bound. Every `YOUNG_GC_EVERY` bytes a
 * young-generation collection (about a millisecond: the chunks' Buffer objects are young) frees
 * them, and the full collections the external bytes used to force mostly do not happen. No-op
 * unless `tuneV8` ran (tests that build parts of the gateway in-process).
 */
export function passedOnBodyBytes(bytes: number): void {
  if (minorGc === undefined) return;
  sinceLastGc += bytes;
  if (sinceLastGc < YOUNG_GC_EVERY) return;
  sinceLastGc = 0;
  try {
    minorGc();
  } catch {
    // A Node whose gc() no longer takes these options: no pacing, rather than a failed request.
    minorGc = undefined;
  }
}
