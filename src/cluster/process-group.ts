import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
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

/** A script of Flink's distribution running in its own process group. */
export interface Member {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
  /** What the script was started with (a JobManager restarts with the same). */
  script: string;
  args: string[];
}

/** Starts one script in its own process group (detached), output to log/<name>.console. */
export function launch(name: string, script: string, args: string[], dir: string, env: NodeJS.ProcessEnv): Member {
  const out = openSync(join(dir, 'log', `${name}.console`), 'a', 0o600);
  const child = spawn('bash', [script, 'start-foreground', ...args], { detached: true, stdio: ['ignore', out, out], env, cwd: dir });
  closeSync(out);
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  return { name, child, exited, script, args };
}
