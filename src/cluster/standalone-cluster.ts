import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { Logger } from 'pino';
import { parse as parseYaml } from 'yaml';
import { childEnvironment } from './embedded-cluster';
import { freePort, launch, type Member, signalGroup } from './process-group';
import { flinkDistributionVersion } from './flink-distribution';

export interface StandaloneClusterOptions {
  /** A Flink distribution directory (FlinkDistribution.ensure, or a user's own). */
  home: string;
  taskManagers: number;
  /**
   * JobManager processes (default 1). More than one needs Flink's HA settings in `flinkConfig`
   * (`high-availability.type` and its storage): each gets its own REST and RPC port as dynamic
   * properties (`-D`) on Flink's script, everything else from the one config.yaml.
   */
  jobManagers?: number;
  /** Flink configuration of JobManager `i` only (dynamic properties on its script), e.g. where its token bridge pulls from. */
  jobManagerConfig?: (i: number) => Readonly<Record<string, string>>;
  slots: number;
  /** Added to env.java.opts.all (after the distribution's own --add-opens list). */
  jvmOptions?: string;
  /** Jars added to lib/ as a user installs them (e.g. the token bridge), without touching `home`. */
  extraLibJars?: readonly string[];
  /** Flink configuration on top of the launcher's loopback defaults (written to config.yaml, mode 0600). */
  flinkConfig?: Readonly<Record<string, string>>;
  startupTimeoutMs: number;
  log: Logger;
  java?: string;
}

/** The member name of JobManager `i` ('jobmanager' for the first, as with one). */
const jobManagerName = (i: number) => (i === 0 ? 'jobmanager' : `jobmanager-${i}`);
const isJobManager = (m: Member) => m.name === 'jobmanager' || m.name.startsWith('jobmanager-');

/** Loopback only, small memory: a session cluster for one machine (tests, `npm start`). */
function launcherDefaults(dir: string, restPort: number, rpcPort: number, slots: number): Record<string, string> {
  return {
    'jobmanager.rpc.address': '127.0.0.1',
    'jobmanager.rpc.port': String(rpcPort),
    'jobmanager.bind-host': '127.0.0.1',
    'taskmanager.bind-host': '127.0.0.1',
    'taskmanager.host': '127.0.0.1',
    'rest.address': '127.0.0.1',
    'rest.bind-address': '127.0.0.1',
    'rest.port': String(restPort),
    'jobmanager.memory.process.size': '900m',
    'taskmanager.memory.process.size': '1024m',
    // Streaming jobs without RocksDB need no managed memory; the heap gets it instead.
    'taskmanager.memory.managed.size': '32m',
    'taskmanager.numberOfTaskSlots': String(slots),
    'parallelism.default': '1',
    'web.upload.dir': join(dir, 'upload'),
    'web.tmpdir': join(dir, 'tmp'),
    'io.tmp.dirs': join(dir, 'tmp'),
  };
}

/**
 * A Flink session cluster as users run it: one JobManager (`bin/jobmanager.sh start-foreground`,
 * StandaloneSessionClusterEntrypoint) and `taskManagers` TaskManagers (`bin/taskmanager.sh
 * start-foreground`), each a separate process started by Flink's own scripts, each in its own
 * process group (the scripts `exec` java, so the group id is the JVM's pid), stopped by group id.
 * Everything a run writes (config.yaml, logs, pid files, uploads, temp files) lives in one private
 * directory removed on stop; the distribution itself is never written to. ADR 0011.
 */
export class StandaloneCluster {
  private stopped = false;
  private readonly onExit = () => this.killAll('SIGKILL');

  private constructor(
    /** Every JobManager's REST URL, in start order; `restUrl` is the first. */
    readonly restUrls: readonly string[],
    readonly uploadDir: string,
    readonly version: string,
    /** The configuration directory (FLINK_CONF_DIR): Flink's CLI reads the cluster address from it. */
    readonly confDir: string,
    readonly dir: string,
    readonly home: string,
    private readonly members: Member[],
    private readonly env: NodeJS.ProcessEnv,
    private readonly log: Logger,
  ) {
    // A parent that exits without stop() (a crashed test run) must not leave JVMs behind.
    process.once('exit', this.onExit);
  }

  /** The first JobManager's REST URL (the only one without HA). */
  get restUrl(): string {
    return this.restUrls[0]!;
  }

  /** The environment Flink's scripts (and its CLI) need for this cluster. */
  static scriptEnv(home: string, dir: string, java?: string): NodeJS.ProcessEnv {
    return {
      ...childEnvironment(),
      FLINK_HOME: home,
      FLINK_CONF_DIR: join(dir, 'conf'),
      FLINK_LOG_DIR: join(dir, 'log'),
      FLINK_PID_DIR: join(dir, 'pid'),
      FLINK_LIB_DIR: join(dir, 'lib'),
      ...(java ? { JAVA_RUN: java } : {}),
    };
  }

  static async start(opts: StandaloneClusterOptions): Promise<StandaloneCluster> {
    const version = flinkDistributionVersion(opts.home);
    const log = opts.log.child({ component: 'flink-standalone', version });
    const started = performance.now();
    const dir = mkdtempSync(join(tmpdir(), `flink-jar-gateway-flink-${version}-`));
    for (const sub of ['conf', 'log', 'pid', 'lib', 'upload', 'tmp']) mkdirSync(join(dir, sub), { recursive: true, mode: 0o700 });
    // lib/ as a directory of links: the distribution's jars plus the extra ones (the scripts put
    // every *.jar of FLINK_LIB_DIR on the class path, links included).
    for (const jar of readdirSync(join(opts.home, 'lib'))) symlinkSync(join(opts.home, 'lib', jar), join(dir, 'lib', jar));
    for (const jar of opts.extraLibJars ?? []) symlinkSync(jar, join(dir, 'lib', basename(jar)));
    // The log4j/logback files the scripts name are read from FLINK_CONF_DIR.
    for (const f of readdirSync(join(opts.home, 'conf'))) {
      if (/^(log4j|logback).*\.(properties|xml)$/.test(f)) writeFileSync(join(dir, 'conf', f), readFileSync(join(opts.home, 'conf', f)));
    }
    const jobManagers = opts.jobManagers ?? 1;
    const ports: { rest: number; rpc: number }[] = [];
    for (let i = 0; i < jobManagers; i++) ports.push({ rest: await freePort(), rpc: await freePort() });
    const config: Record<string, string> = {
      'env.java.opts.all': [shippedJavaOpts(opts.home), opts.jvmOptions ?? ''].filter(Boolean).join(' '),
      ...launcherDefaults(dir, ports[0]!.rest, ports[0]!.rpc, opts.slots),
      ...(opts.flinkConfig ?? {}),
    };
    if (jobManagers > 1 && !config['high-availability.type'] && !config['high-availability'])
      throw new Error('more than one JobManager needs high-availability.type in flinkConfig');
    writeFileSync(join(dir, 'conf', 'config.yaml'), configYaml(config), { mode: 0o600 });
    const env = StandaloneCluster.scriptEnv(opts.home, dir, opts.java);
    const members: Member[] = [];
    const restUrls = ports.map((p) => `http://127.0.0.1:${p.rest}`);
    const cluster = new StandaloneCluster(restUrls, join(dir, 'upload'), version, join(dir, 'conf'), dir, opts.home, members, env, log);
    try {
      ports.forEach((p, i) => {
        // With HA the RPC port is high-availability.jobmanager.port (default: any port); fixed here so each is known.
        const ports =
          jobManagers > 1
            ? { 'rest.port': String(p.rest), 'jobmanager.rpc.port': String(p.rpc), 'high-availability.jobmanager.port': String(p.rpc) }
            : {};
        const own = Object.entries({ ...ports, ...(opts.jobManagerConfig?.(i) ?? {}) }).flatMap(([k, v]) => ['-D', `${k}=${v}`]);
        members.push(launch(jobManagerName(i), join(opts.home, 'bin', 'jobmanager.sh'), own, dir, env));
      });
      for (let i = 0; i < opts.taskManagers; i++)
        members.push(launch(`taskmanager-${i}`, join(opts.home, 'bin', 'taskmanager.sh'), [], dir, env));
      await cluster.waitReady(opts.taskManagers, opts.startupTimeoutMs);
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    log.info(
      { restUrls, taskManagers: opts.taskManagers, startupMs: Math.round(performance.now() - started), dir },
      'Flink standalone session cluster ready',
    );
    return cluster;
  }

  /**
   * Waits until every JobManager's REST answers (a standby's too: it serves the leader's view) and
   * `taskManagers` TaskManagers are registered; fails fast if a process exits.
   */
  private async waitReady(taskManagers: number, timeoutMs: number, urls: readonly string[] = this.restUrls): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let exited: string | undefined;
    for (const m of this.members) void m.exited.then(() => (exited ??= m.name));
    const ready = new Set<string>();
    while (Date.now() < deadline) {
      if (exited) throw new Error(`Flink's ${exited} exited during start-up: ${this.logTail(exited)}`);
      for (const url of urls.filter((u) => !ready.has(u))) {
        try {
          const res = await fetch(`${url}/v1/overview`, { signal: AbortSignal.timeout(2000) });
          if (res.ok && Number(((await res.json()) as { taskmanagers?: number }).taskmanagers) >= taskManagers) ready.add(url);
        } catch {
          /* not listening yet */
        }
      }
      if (ready.size === urls.length) return;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`the Flink ${this.version} cluster was not ready within ${timeoutMs} ms: ${this.logTail('jobmanager')}`);
  }

  /** The JVM's pid of JobManager `i` (its scripts exec java, so it is the group id too). */
  jobManagerPid(i: number): number | undefined {
    return this.members.find((m) => m.name === jobManagerName(i))?.child.pid;
  }

  /** Kills JobManager `i`'s process group with SIGKILL (a crash, as a pod's death) and waits for it to exit. */
  async killJobManager(i: number): Promise<void> {
    const m = this.members.find((x) => x.name === jobManagerName(i));
    if (!m) throw new Error(`no JobManager ${i}`);
    signalGroup(m.child, 'SIGKILL');
    await m.exited;
  }

  /** Starts JobManager `i` again (after killJobManager) with its ports; resolves once its REST answers. */
  async restartJobManager(i: number, timeoutMs = 120_000): Promise<void> {
    const at = this.members.findIndex((x) => x.name === jobManagerName(i));
    const old = this.members[at];
    if (!old) throw new Error(`no JobManager ${i}`);
    if (old.child.exitCode === null && old.child.signalCode === null) throw new Error(`JobManager ${i} is still running`);
    this.members[at] = launch(old.name, old.script, old.args, this.dir, this.env);
    await this.waitReady(0, timeoutMs, [this.restUrls[i]!]);
  }

  /** The last lines of a member's console output (stdout/stderr of its scripts and JVM). */
  logTail(name: string, lines = 15): string {
    try {
      return readFileSync(join(this.dir, 'log', `${name}.console`), 'utf8')
        .trim()
        .split('\n')
        .slice(-lines)
        .join('\n');
    } catch {
      return '(no output)';
    }
  }

  /** Stops TaskManagers, then the JobManager: SIGTERM to each process group, SIGKILL after `graceMs`. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const stopOne = async (m: Member) => {
      signalGroup(m.child, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(m.child, 'SIGKILL'), graceMs);
      await m.exited;
      clearTimeout(timer);
      // Helpers the scripts started in the group (none are expected once java exits).
      signalGroup(m.child, 'SIGKILL');
    };
    await Promise.all(this.members.filter((m) => !isJobManager(m)).map(stopOne));
    await Promise.all(this.members.filter(isJobManager).map(stopOne));
    process.removeListener('exit', this.onExit);
    rmSync(this.dir, { recursive: true, force: true });
    this.log.info('Flink standalone session cluster stopped');
  }

  private killAll(signal: NodeJS.Signals): void {
    for (const m of this.members) signalGroup(m.child, signal);
  }
}

/**
 * The distribution's own `env.java.opts.all` (Java 17's --add-opens list): the JVMs need it and the
 * config.yaml written here replaces the shipped one.
 */
function shippedJavaOpts(home: string): string {
  const file = join(home, 'conf', existsSync(join(home, 'conf', 'config.yaml')) ? 'config.yaml' : 'flink-conf.yaml');
  try {
    const doc = parseYaml(readFileSync(file, 'utf8')) as Record<string, unknown> | null;
    const flat = doc?.['env.java.opts.all'];
    const nested = ((doc?.env as Record<string, unknown> | undefined)?.java as Record<string, unknown> | undefined)?.opts as
      | Record<string, unknown>
      | undefined;
    return String(flat ?? nested?.all ?? '');
  } catch {
    return '';
  }
}

/** Flat `key: "value"` lines (a JSON string is a valid YAML scalar); 1.20 and 2.x read them alike. */
function configYaml(config: Record<string, string>): string {
  const lines = ['# Written by flink-jar-gateway for a standalone session cluster; removed when it stops.'];
  for (const [key, value] of Object.entries(config)) {
    if (!/^[A-Za-z0-9$][A-Za-z0-9._$-]*$/.test(key)) throw new Error(`'${key}' is not a Flink configuration key`);
    lines.push(`${key}: ${JSON.stringify(value)}`);
  }
  return `${lines.join('\n')}\n`;
}
