import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { runProcess } from './run-process';

/** What Flink's default configuration gives its JVMs on Java 17 (env.java.opts.all of its config.yaml). */
export const FLINK_JAVA17_OPENS = [
  'java.util',
  'java.lang',
  'java.lang.reflect',
  'java.io',
  'java.net',
  'java.nio',
  'java.text',
  'java.time',
  'java.util.concurrent',
].map((p) => `--add-opens=java.base/${p}=ALL-UNNAMED`);

/** test/java-client: Flink's own Java client replaying the operator's REST sequence (its README). */
const moduleDir = join(projectRoot(__dirname), 'test', 'java-client');

export type FlinkClientLine = '2.1' | '1.20';

/** One step of the sequence as the program prints it. */
export interface SequenceStep {
  ok: boolean;
  jobid?: string;
  jarId?: string;
  error?: string;
  httpStatus?: number;
  listed?: boolean;
}

export type SequenceResult = Record<string, unknown> &
  Record<'upload' | 'run1' | 'run2' | 'overview' | 'delete1' | 'delete2', SequenceStep>;

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((name) => newestMtime(join(path, name))));
}

/**
 * Under flock (test files that need the same build at once must not write one target directory
 * together), and checked again once the lock is held: build unless the jar is newer than every
 * source; then mark the jar as built from them (maven-jar-plugin may leave an up-to-date jar alone).
 * $1 = output id (a line, or an exact release), $2 = Maven profile's line, $3 = exact release or ''.
 */
const BUILD_IF_STALE = `jar="target/flink-$1/compat.jar"
if [ ! -e "$jar" ] || [ -n "$(find src pom.xml -newer "$jar" -print -quit)" ]; then
  if [ -n "$3" ]; then mvn -q -B -f pom.xml "-Pflink-$2" "-Dflink.version=$3" "-Dclient.id=$1" package
  else mvn -q -B -f pom.xml "-Pflink-$2" package; fi && touch "$jar"
fi`;

/** The client line whose JarRunRequestBody constructor a release has: 1.20 for 1.x, 2.1 for every 2.x. */
export function clientLineOf(version: string): FlinkClientLine {
  return version.startsWith('1.') ? '1.20' : '2.1';
}

/**
 * Builds the compat program against one Flink line (its profile's version), or against one exact
 * release (`version`, e.g. 2.3.0: Flink's client of the same version as a distribution under
 * test), unless its jar is newer than the sources. Returns the output directory.
 */
export function buildJavaClient(line: FlinkClientLine, version?: string): string {
  const id = version ?? line;
  const dir = join(moduleDir, 'target', `flink-${id}`);
  const jar = join(dir, 'compat.jar');
  const sources = Math.max(newestMtime(join(moduleDir, 'src')), newestMtime(join(moduleDir, 'pom.xml')));
  if (existsSync(jar) && statSync(jar).mtimeMs >= sources) return dir;
  mkdirSync(join(moduleDir, 'target'), { recursive: true });
  execFileSync('flock', [join(moduleDir, 'target', `.build-${id}.lock`), 'sh', '-c', BUILD_IF_STALE, 'build', id, line, version ?? ''], {
    cwd: moduleDir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return dir;
}

/**
 * Runs `dev.flinkjargateway.compat.OperatorSequence` with `args` (see test/java-client/README.md)
 * and returns its JSON. `env` is added to the environment (OPERATOR_KEYSTORE_PATH and friends);
 * `version` picks a client built for that exact release (see buildJavaClient).
 */
export async function runOperatorSequence(
  line: FlinkClientLine,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  version?: string,
): Promise<SequenceResult> {
  const dir = buildJavaClient(line, version);
  const r = await runProcess('java', ['-cp', `${dir}/compat.jar:${dir}/lib/*`, 'dev.flinkjargateway.compat.OperatorSequence', ...args], {
    env: { ...process.env, ...env },
    timeoutMs: 300_000,
  });
  if (r.status !== 0) throw new Error(`compat program exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as SequenceResult;
}

/**
 * Flink's own CLI (`flink run …`: `org.apache.flink.client.cli.CliFrontend`, from the compat
 * program's class path, flink-clients 2.1.3) with `args`, configured by a `config.yaml` holding
 * `conf` (FLINK_CONF_DIR is a temporary directory). `flink run` builds the job graph locally and
 * submits it with POST /v1/jobs (multipart: the serialised JobGraph and the jar).
 */
export async function runFlinkCli(
  args: readonly string[],
  conf: Record<string, string>,
  confDir: string,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const dir = buildJavaClient('2.1');
  writeFileSync(
    join(confDir, 'config.yaml'),
    Object.entries(conf)
      .map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`)
      .join(''),
  );
  return runProcess(
    'java',
    [...FLINK_JAVA17_OPENS, '-cp', `${dir}/compat.jar:${dir}/lib/*`, 'org.apache.flink.client.cli.CliFrontend', ...args],
    {
      env: { ...process.env, FLINK_CONF_DIR: confDir },
      timeoutMs: 180_000,
    },
  );
}
