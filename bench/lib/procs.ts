import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** Every child this benchmark started, so that an early exit still stops each one by its PID. */
const children = new Set<ChildProcess>();

export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Last resort on exit: SIGKILL each child we started (by PID, never by name). */
export function killAllTracked(): void {
  for (const c of children) {
    if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) {
      try {
        process.kill(c.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
}

/** Stops one child: SIGTERM, then SIGKILL after `graceMs`. */
export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Spawns a long-running child and waits for a line matching `ready` on stdout or stderr. Output is
 * drained for the child's whole life (a full pipe would block it); `onLine` sees every stdout line.
 */
export async function startChild(
  cmd: string,
  args: string[],
  opts: { ready: RegExp; timeoutMs: number; env?: NodeJS.ProcessEnv; onLine?: (line: string) => void },
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const child = track(spawn(cmd, args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      done = true;
      child.kill('SIGKILL');
      reject(new Error(`${cmd} not ready within ${opts.timeoutMs} ms:\n${output.slice(-4000)}`));
    }, opts.timeoutMs);
    const check = (line: string) => {
      if (!done && output.length < 64 * 1024) output += `${line}\n`;
      const m = opts.ready.exec(line);
      if (m && !done) {
        done = true;
        clearTimeout(timer);
        resolve(m);
      }
    };
    createInterface({ input: child.stdout! }).on('line', (line) => {
      check(line);
      opts.onLine?.(line);
    });
    createInterface({ input: child.stderr! }).on('line', check);
    child.once('error', (err) => {
      clearTimeout(timer);
      if (!done) reject(err);
      done = true;
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!done) reject(new Error(`${cmd} exited (${code}) before it was ready:\n${output.slice(-4000)}`));
      done = true;
    });
  });
  return { child, match };
}

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a short-lived command asynchronously (never spawnSync: an in-process server must keep serving). */
export function runCommand(cmd: string, args: string[], timeoutMs: number): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, ms: performance.now() - started });
    });
  });
}

/** curl, failing on a non-zero exit; returns stdout and the wall time of the whole process. */
export async function curl(args: string[], timeoutMs = 120_000): Promise<RunResult> {
  const r = await runCommand('curl', ['-sS', ...args], timeoutMs);
  if (r.status !== 0) throw new Error(`curl ${args.filter((a) => !a.includes('?')).join(' ')} failed (${r.status}): ${r.stderr.trim()}`);
  return r;
}

export interface GatewayProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  /** Parsed pino lines the gateway wrote to stdout. */
  logs: Record<string, unknown>[];
  stop(): Promise<void>;
}

/**
 * Runs the built gateway (`node bin/flink-jar-gateway.js`, dist/ from `npm run build`) as its own
 * process on 127.0.0.1:0 with `-Dkey=value` options. BENCH_GATEWAY_NODE_ARGS adds Node flags
 * (e.g. `--cpu-prof --cpu-prof-dir=.tmp/prof`) for profiling; BENCH_GATEWAY_STDOUT=<file> appends
 * every line the gateways print to that file (e.g. with `--trace-gc`).
 */
export async function startGatewayProcess(root: string, options: Record<string, string>): Promise<GatewayProcess> {
  const logs: Record<string, unknown>[] = [];
  const rawLines = process.env.BENCH_GATEWAY_STDOUT;
  const nodeArgs = (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const args = [...nodeArgs, join(root, 'bin', 'flink-jar-gateway.js'), '-Drest.port=0', '-Drest.bind-address=127.0.0.1'];
  for (const [k, v] of Object.entries(options)) args.push(`-D${k}=${v}`);
  const { child, match } = await startChild(process.execPath, args, {
    ready: /^GATEWAY_URL=(\S+)/,
    timeoutMs: 60_000,
    onLine: (line) => {
      if (rawLines) appendFileSync(rawLines, `${line}\n`);
      if (line.startsWith('{')) {
        try {
          logs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          /* not a log line */
        }
      }
    },
  });
  return {
    url: match[1]!,
    pid: child.pid!,
    child,
    logs,
    stop: () => stopChild(child, 15_000),
  };
}

/** VmRSS and VmHWM of a process, in bytes (Linux /proc). */
export function memoryOf(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

/** Resets the peak RSS (VmHWM) of a process we own to its current RSS; false where the kernel refuses. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

const CLK_TCK = 100; // Linux USER_HZ, what /proc/<pid>/stat counts in (getconf CLK_TCK)

/** utime, stime, cutime and cstime of a process from /proc/<pid>/stat, in seconds. */
function procTimes(pid: number | 'self'): { self: number; children: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; the fields after its closing ')' are fixed.
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  // After ')': state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17) → indices 11..14 here.
  return { self: (f[11]! + f[12]!) / CLK_TCK, children: (f[13]! + f[14]!) / CLK_TCK };
}

/**
 * CPU seconds (user + system) that this process's reaped children have used so far, grandchildren
 * included when their parents waited for them (bash waits for each command of a pipeline). Take
 * it before and after a child runs, with no other child exiting in between: the difference is that
 * child's CPU. Resolution 10 ms.
 */
export function childrenCpuSeconds(): number {
  return procTimes('self').children;
}

/** CPU seconds (user + system) a running process has used so far (for a server we started). */
export function processCpuSeconds(pid: number): number {
  return procTimes(pid).self;
}

/**
 * CPU seconds (user + system) a running process's live threads have used so far, summed by thread
 * name: `main` for its main thread; for a Node process `V8Worker` (the garbage collector's and
 * compiler's helpers), `libuv-worker` (the fs and crypto pool), and a worker thread's own name
 * (`file-sha256`). Threads that have exited are not counted. Resolution 10 ms.
 */
export function threadCpuSeconds(pid: number): Record<string, number> {
  const byName: Record<string, number> = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // exited between the listing and the read
    }
    const name = tid === String(pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    byName[name] = (byName[name] ?? 0) + (Number(f[11]) + Number(f[12])) / CLK_TCK;
  }
  return byName;
}

/** CPU seconds (user + system, all threads) of this process, from process.cpuUsage(). */
export function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}
