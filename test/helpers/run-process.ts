import { spawn } from 'node:child_process';

export interface ProcessResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a child process without blocking the event loop. (spawnSync would freeze the in-process
 * gateway the child is talking to.)
 */
/**
 * How long a test lets a short CLI run (start, answer, exit) take before killing it: generous, since
 * a busy machine can spend tens of seconds just loading the gateway's code.
 */
export const PROCESS_TIMEOUT_MS = 90_000;

export function runProcess(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs: number; cwd?: string },
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
