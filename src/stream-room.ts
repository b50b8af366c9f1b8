import type { Writable } from 'node:stream';

/**
 * Calls `then` once `stream` has room again after a `write` returned false ('drain'), or once it
 * closed (a destroyed stream takes nothing more, and its writer must not wait for it forever).
 */
export function whenRoom(stream: Writable, then: () => void): void {
  const go = () => {
    stream.off('drain', go);
    stream.off('close', go);
    then();
  };
  stream.on('drain', go);
  stream.on('close', go);
}
