import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Bytes held by Buffers and ArrayBuffers right after a full, forced garbage collection: unlike RSS,
 * what a stream really keeps, whatever the collector did before. "Flat memory" tests take it while
 * a reader or writer stands still, so a bounded implementation passes however long the pause.
 */
export function heldBufferBytes(): number {
  // Twice: V8 frees the backing stores of dead ArrayBuffers on a background thread after a full
  // collection, and `arrayBuffers` counts them until that sweep ends; the next collection finishes
  // it first. With one, a run on a loaded machine read far more than runs alone do, past the
  // pass-through test's bound: a sweep starved of CPU explains it.
  forcedGc();
  forcedGc();
  return process.memoryUsage().arrayBuffers;
}

let gcFn: (() => void) | undefined;
function forcedGc(): void {
  if (gcFn === undefined) {
    setFlagsFromString('--expose-gc');
    gcFn = runInNewContext('gc') as () => void;
  }
  gcFn();
}
