import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';

export interface EmbeddedClusterOptions {
  /** Project root holding embedded-flink/. */
  rootDir: string;
  java?: string;
  jvmOptions: string[];
  slots: number;
  /** Shared with the gateway (web.upload.dir); a temporary directory when unset. */
  uploadDir?: string;
  startupTimeoutMs: number;
  log: Logger;
  /**
   * Extra Flink configuration, written to a temporary file (mode 0600, in a 0700 directory removed
   * on stop) passed with `--config`: never on the JVM command line, which the process list shows.
   * Applied before the launcher's forced keys (see embedded-flink/README.md).
   */
  flinkConfig?: Readonly<Record<string, string>>;
}

/** Thrown when Java or Maven is missing: the message is one line that says what to do. */
export class EmbeddedUnavailableError extends Error {
  readonly code = 'GW_EMBEDDED_UNAVAILABLE';
}

const HOW_TO_FRONT = 'to front an existing JobManager instead, run: npm start -- -Dgateway.cluster.rest-url=http://<jobmanager>:8081';

/**
 * A real Flink 2.1 session cluster in one JVM (embedded-flink/), started for `npm start` and for
 * the e2e tests. It binds 127.0.0.1 on an ephemeral port whatever the gateway's own rest.* says,
 * prints its URL when ready, and exits when its stdin closes, so it never outlives the gateway.
 */
export class EmbeddedCluster {
  private constructor(
    readonly restUrl: string,
    readonly uploadDir: string,
    private readonly child: ChildProcess,
    private readonly ownsUploadDir: boolean,
    private readonly configDir: string | undefined,
  ) {}

  /** The JVM's process id (the bench reads its CPU time). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  static jarPath(rootDir: string): string {
    return join(rootDir, 'embedded-flink', 'target', 'embedded-flink.jar');
  }

  /**
   * Builds the token bridge (token-bridge/, installed into the local Maven repository, since
   * embedded-flink depends on it) and embedded-flink with Maven when the last successful build is
   * older than either module's pom or sources, or its outputs are missing. The build time is a
   * stamp file (the jar plugin keeps an unchanged jar's old mtime).
   */
  static ensureBuilt(rootDir: string, log: Logger): void {
    const jar = EmbeddedCluster.jarPath(rootDir);
    const moduleDir = join(rootDir, 'embedded-flink');
    const bridgeDir = join(rootDir, 'token-bridge');
    const stamp = join(moduleDir, 'target', BUILD_STAMP);
    const sources = [join(moduleDir, 'pom.xml'), join(moduleDir, 'src'), join(bridgeDir, 'pom.xml'), join(bridgeDir, 'src', 'main')];
    if (
      existsSync(jar) &&
      existsSync(join(moduleDir, 'target', 'lib')) &&
      existsSync(stamp) &&
      newestMtime(sources) <= statSync(stamp).mtimeMs
    )
      return;
    if (spawnSync('mvn', ['-v'], { stdio: 'ignore' }).status !== 0) {
      throw new EmbeddedUnavailableError(`the embedded Flink cluster needs Maven to build once (mvn not found); ${HOW_TO_FRONT}`);
    }
    log.info(
      'building the embedded Flink cluster and the token bridge with Maven (first run, or after a source change; downloads Flink from Maven Central)',
    );
    const started = Date.now();
    const steps: [string, string[]][] = [
      ['token-bridge', ['-q', '-B', '-f', join(bridgeDir, 'pom.xml'), 'install', '-DskipTests']],
      ['embedded-flink', ['-q', '-B', '-f', join(moduleDir, 'pom.xml'), 'package', '-DskipTests']],
    ];
    for (const [name, args] of steps) {
      const r = spawnSync('mvn', args, { stdio: ['ignore', 'inherit', 'inherit'] });
      if (r.status !== 0) throw new EmbeddedUnavailableError(`building ${name} with Maven failed (exit ${r.status}); ${HOW_TO_FRONT}`);
    }
    // Sources edited during the build are newer than the stamp, so they trigger the next build.
    writeFileSync(stamp, `${new Date(started).toISOString()}\n`);
    utimesSync(stamp, new Date(started), new Date(started));
  }

  /** Writes `flinkConfig` as flat YAML (`key: "value"`, JSON-quoted) into a new private directory. */
  static writeConfigFile(flinkConfig: Readonly<Record<string, string>>): { dir: string; file: string } {
    const dir = mkdtempSync(join(tmpdir(), 'flink-jar-gateway-flink-conf-'));
    const file = join(dir, 'config.yaml');
    const lines = ['# Written by flink-jar-gateway for its embedded Flink cluster; removed when it stops.'];
    for (const [key, value] of Object.entries(flinkConfig)) {
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(key)) {
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`'${key}' is not a Flink configuration key`);
      }
      // A JSON string is a valid YAML double-quoted scalar.
      lines.push(`${key}: ${JSON.stringify(value)}`);
    }
    writeFileSync(file, `${lines.join('\n')}\n`, { mode: 0o600 });
    return { dir, file };
  }

  static async start(opts: EmbeddedClusterOptions): Promise<EmbeddedCluster> {
    const java = opts.java ?? (process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java');
    if (spawnSync(java, ['-version'], { stdio: 'ignore' }).error) {
      throw new EmbeddedUnavailableError(`the embedded Flink cluster needs Java 17+ (${java} not found); ${HOW_TO_FRONT}`);
    }
    EmbeddedCluster.ensureBuilt(opts.rootDir, opts.log);
    const ownsUploadDir = opts.uploadDir === undefined;
    const uploadDir = opts.uploadDir ?? mkdtempSync(join(tmpdir(), 'flink-jar-gateway-'));
    const started = performance.now();
    // Secrets never go on this command line (it is visible in the process list).
    const conf =
      opts.flinkConfig && Object.keys(opts.flinkConfig).length > 0 ? EmbeddedCluster.writeConfigFile(opts.flinkConfig) : undefined;
    const child = spawn(
      java,
      // -Djava.security.manager=allow: Java 18-23 refuse Flink's exit-intercepting security manager otherwise.
      [
        ...opts.jvmOptions,
        '-Djava.security.manager=allow',
        '-jar',
        EmbeddedCluster.jarPath(opts.rootDir),
        '--upload-dir',
        uploadDir,
        '--slots',
        String(opts.slots),
        ...(conf ? ['--config', conf.file] : []),
      ],
      // Job code runs in this JVM and can read its environment: it gets none of the gateway's
      // (FLINK_GATEWAY_* options, cloud credentials), only what a JVM needs to run.
      { stdio: ['pipe', 'pipe', 'pipe'], env: childEnvironment() },
    );
    const removeConf = () => {
      if (conf) rmSync(conf.dir, { recursive: true, force: true });
    };
    const log = opts.log.child({ component: 'embedded-flink' });
    createInterface({ input: child.stderr! }).on('line', (line) => log.debug({ jvm: line }, 'embedded Flink'));
    const restUrl = await new Promise<string>((resolve, reject) => {
      child.once('exit', removeConf);
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`the embedded Flink cluster did not start within ${opts.startupTimeoutMs} ms`));
      }, opts.startupTimeoutMs);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const m = /^FLINK_REST_URL=(\S+)$/.exec(line.trim());
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(
          new Error(`the embedded Flink cluster exited during start-up (exit ${code}); run with -Dgateway.log.level=debug to see its log`),
        );
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    log.info({ restUrl, uploadDir, startupMs: Math.round(performance.now() - started) }, 'embedded Flink session cluster ready');
    return new EmbeddedCluster(restUrl, uploadDir, child, ownsUploadDir, conf?.dir);
  }

  /** Closes the JVM's stdin (its shutdown signal) and waits; kills it if it lingers. */
  async stop(graceMs = 15_000): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
      this.child.stdin?.end();
      const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }
    if (this.ownsUploadDir) rmSync(this.uploadDir, { recursive: true, force: true });
    if (this.configDir) rmSync(this.configDir, { recursive: true, force: true });
  }
}

/** The variables a child JVM gets from the gateway's environment; nothing else passes. */
const CHILD_ENV_KEYS = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TMPDIR', 'JAVA_HOME'];

/** A minimal environment for processes the gateway starts (the embedded cluster, Maven). */
export function childEnvironment(source: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const key of CHILD_ENV_KEYS) if (source[key] !== undefined) env[key] = source[key];
  return env;
}

/** embedded-flink/target/<this>: written after each successful Maven build. */
const BUILD_STAMP = 'flink-jar-gateway-build.stamp';

function newestMtime(paths: string[]): number {
  let newest = 0;
  for (const p of paths) {
    if (!existsSync(p)) continue;
    const st = statSync(p);
    if (st.isDirectory()) newest = Math.max(newest, newestMtime(readdirSync(p).map((n) => join(p, n))));
    else newest = Math.max(newest, st.mtimeMs);
  }
  return newest;
}
