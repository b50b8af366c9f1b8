import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Bytes held by Buffers and ArrayBuffers right after a full, forced garbage collection: unlike RSS,
 * what a stream really keeps, whatever the collector did before. "Flat memory" tests take it while
 * a reader or writer stands still, so a bounded implementation passes however long the pause.
 */
export function heldBufferBytes(): number {
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
