import { spawn, type ChildProcess } from 'node:child_process';

export interface ChildServer {
  child: ChildProcess;
  /** The ready line's match (group 1 is usually the URL). */
  match: RegExpExecArray;
  /** SIGTERM, then SIGKILL after 5 s; resolves when the child has exited. */
  stop(): Promise<void>;
}

/**
 * Starts a test server as a child process and waits until its output matches `ready`. The pipes
 * keep draining afterwards so the child never blocks on a full pipe. Rejects (and kills the child)
 * when it exits first or is not ready in time, quoting what it printed.
 */
export async function startChildServer(
  name: string,
  command: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; ready: RegExp; timeoutMs?: number },
): Promise<ChildServer> {
  const child = spawn(command, args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
  };
  // Generous: a busy machine (a full suite beside CPU-bound work) can take tens of seconds to start a Node or Python server.
  const timeoutMs = opts.timeoutMs ?? 120_000;
  try {
    const match = await new Promise<RegExpExecArray>((resolve, reject) => {
      let output = '';
      const timer = setTimeout(() => reject(new Error(`${name} not ready within ${timeoutMs} ms:\n${output}`)), timeoutMs);
      const onData = (d: Buffer) => {
        output += d.toString('utf8');
        const m = opts.ready.exec(output);
        if (m) {
          clearTimeout(timer);
          resolve(m);
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${code}) before it was ready:\n${output}`));
      });
    });
    child.stdout!.resume();
    child.stderr!.resume();
    return { child, match, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
