import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';

/** The built CLI (npm test builds dist/ first). */
export const GATEWAY_BIN = join(projectRoot(__dirname), 'bin', 'flink-jar-gateway.js');

export interface GatewayProcess {
  child: ChildProcess;
  url: string;
  /** Everything the process wrote to stdout so far (its JSON logs and the GATEWAY_URL line). */
  output(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL if still running (for finally blocks). */
  kill(): void;
}

export interface GatewayProcessOptions {
  /** Node that runs the checkout's bin; default this process's Node. Ignored with `bin`. */
  node?: string;
  /**
   * An executable to run instead of `<node> bin/flink-jar-gateway.js`, e.g. the `.bin` entry of an
   * installed package (its shebang picks Node from the child's PATH).
   */
  bin?: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Until GATEWAY_URL is printed; default {@link START_TIMEOUT_MS}. */
  timeoutMs?: number;
}

/** Generous: a busy machine can spend tens of seconds loading the gateway's code before it listens. */
export const START_TIMEOUT_MS = 120_000;

/**
 * Runs the gateway as a separate process, as a user does, and waits for its `GATEWAY_URL=` line.
 * Rejects with the output when it exits first or is not ready in time.
 */
export async function startGatewayProcess(args: string[], opts: GatewayProcessOptions = {}): Promise<GatewayProcess> {
  const [command, argv] = opts.bin === undefined ? [opts.node ?? process.execPath, [GATEWAY_BIN, ...args]] : [opts.bin, args];
  const child = spawn(command, argv, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no GATEWAY_URL within ${opts.timeoutMs ?? START_TIMEOUT_MS} ms:\n${out}`)),
        opts.timeoutMs ?? START_TIMEOUT_MS,
      );
      child.stdout!.on('data', () => {
        const m = /GATEWAY_URL=(\S+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`the gateway exited (${code}) before it was ready:\n${out}`));
      });
    });
    return {
      child,
      url,
      output: () => out,
      stop: () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        return exited;
      },
      kill: () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      },
    };
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}
