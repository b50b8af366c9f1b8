import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

/** Signals a child's whole process group (it was spawned detached, so its pid is the group id). */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    /* the group is gone */
  }
}

/** A free loopback port (closed again before the child binds it; a clash fails start-up loudly). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
