import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
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
  ) {}

  static jarPath(rootDir: string): string {
    return join(rootDir, 'embedded-flink', 'target', 'embedded-flink.jar');
  }

  /** Builds embedded-flink with Maven when its jar is missing or older than its sources. */
  static ensureBuilt(rootDir: string, log: Logger): void {
    const jar = EmbeddedCluster.jarPath(rootDir);
    const moduleDir = join(rootDir, 'embedded-flink');
    if (existsSync(jar) && existsSync(join(moduleDir, 'target', 'lib')) && newestMtime([join(moduleDir, 'pom.xml'), join(moduleDir, 'src')]) <= statSync(jar).mtimeMs) return;
    if (spawnSync('mvn', ['-v'], { stdio: 'ignore' }).status !== 0) {
      throw new EmbeddedUnavailableError(`the embedded Flink cluster needs Maven to build once (mvn not found); ${HOW_TO_FRONT}`);
    }
    log.info('building the embedded Flink cluster with Maven (first run only; downloads Flink from Maven Central)');
    const r = spawnSync('mvn', ['-q', '-B', '-f', join(moduleDir, 'pom.xml'), 'package', '-DskipTests'], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) throw new EmbeddedUnavailableError(`building embedded-flink with Maven failed (exit ${r.status}); ${HOW_TO_FRONT}`);
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
    const child = spawn(java, [...opts.jvmOptions, '-jar', EmbeddedCluster.jarPath(opts.rootDir), '--upload-dir', uploadDir, '--slots', String(opts.slots)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const log = opts.log.child({ component: 'embedded-flink' });
    createInterface({ input: child.stderr! }).on('line', (line) => log.debug({ jvm: line }, 'embedded Flink'));
    const restUrl = await new Promise<string>((resolve, reject) => {
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
        reject(new Error(`the embedded Flink cluster exited during start-up (exit ${code}); run with -Dgateway.log.level=debug to see its log`));
      });
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    log.info({ restUrl, uploadDir, startupMs: Math.round(performance.now() - started) }, 'embedded Flink session cluster ready');
    return new EmbeddedCluster(restUrl, uploadDir, child, ownsUploadDir);
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
  }
}

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
