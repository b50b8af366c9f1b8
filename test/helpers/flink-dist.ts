import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { EmbeddedCluster } from '../../src/cluster/embedded-cluster';
import { ensureFlinkDistribution } from '../../src/cluster/flink-distribution';
import { StandaloneCluster } from '../../src/cluster/standalone-cluster';
import { projectRoot } from '../../src/project-root';
import { WORDCOUNT_JAR } from './flink';
import { runProcess } from './run-process';

/** The Flink lines the gateway supports, each tested on its own distribution (test/distribution/). */
export const DIST_VERSIONS = ['1.20.5', '2.0.2', '2.1.3', '2.2.1', '2.3.0'] as const;

const root = projectRoot(__dirname);
const log = pino({ level: process.env.E2E_FLINK_LOG === '1' ? 'debug' : 'warn' });

/** The token bridge jar (token-bridge/, built by EmbeddedCluster.ensureBuilt with embedded-flink). */
export const TOKEN_BRIDGE_JAR = join(root, 'token-bridge', 'target', 'flink-jar-gateway-token-bridge.jar');
export const TEST_JOB_JAR = join(root, 'embedded-flink', 'target', 'test-jars', 'GatewayTestJob.jar');

/**
 * Flink's own WordCount for a line: 1.x gets 1.20.0's (the last 1.x build on Maven Central; 2.x
 * examples do not run on 1.20's DataStream API), 2.x the 2.3.0 build embedded-flink fetches (no
 * 2.0–2.2 builds are published; it runs on each, flink-connector-files being in lib/).
 */
export function wordCountJarFor(version: string): string {
  if (!version.startsWith('1.')) return WORDCOUNT_JAR;
  const jar = join(
    homedir(),
    '.m2',
    'repository',
    'org',
    'apache',
    'flink',
    'flink-examples-streaming',
    '1.20.0',
    'flink-examples-streaming-1.20.0-WordCount.jar',
  );
  if (!existsSync(jar)) {
    // Its parent POM is served, but 2.8's `get` without transitive resolution is all that is needed.
    execFileSync(
      'mvn',
      [
        '-q',
        '-B',
        'org.apache.maven.plugins:maven-dependency-plugin:2.8:get',
        '-Dartifact=org.apache.flink:flink-examples-streaming:1.20.0:jar:WordCount',
        '-Dtransitive=false',
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
  }
  return jar;
}

/** Flink `version`'s distribution, assembled once into the user cache dir (~/.cache/flink-jar-gateway). */
export function distributionHome(version: string): string {
  // The project's venv has pip (scripts/test-setup.sh makes it); Debian's python3 may not.
  const venvPython = join(root, '.tmp', 'venv', 'bin', 'python');
  return ensureFlinkDistribution({ version, log, ...(existsSync(venvPython) ? { python: venvPython } : {}) });
}

export interface DistClusterOptions {
  taskManagers?: number;
  slots?: number;
  flinkConfig?: Record<string, string>;
  extraLibJars?: string[];
}

/**
 * Assembles (once, cached in the user cache dir) and starts Flink `version`'s own distribution as
 * a standalone session cluster: separate JobManager and TaskManager processes from Flink's scripts.
 * Small heaps: the machine is shared. Prints the start time, so a slow start shows in the test log.
 */
export async function startDistCluster(version: string, opts: DistClusterOptions = {}): Promise<StandaloneCluster> {
  // The test jars (WordCount, GatewayTestJob) and the token bridge come from the embedded-flink build.
  EmbeddedCluster.ensureBuilt(root, log);
  const home = distributionHome(version);
  const t0 = performance.now();
  const cluster = await StandaloneCluster.start({
    home,
    taskManagers: opts.taskManagers ?? 1,
    slots: opts.slots ?? 2,
    jvmOptions: '-XX:+UseSerialGC -XX:TieredStopAtLevel=1',
    ...(opts.extraLibJars ? { extraLibJars: opts.extraLibJars } : {}),
    ...(opts.flinkConfig ? { flinkConfig: opts.flinkConfig } : {}),
    startupTimeoutMs: 180_000,
    log,
  });
  process.stderr.write(
    `Flink ${version} distribution: JobManager + ${opts.taskManagers ?? 1} TaskManager(s) ready in ${Math.round(performance.now() - t0)} ms\n`,
  );
  return cluster;
}

/**
 * That version's own CLI (`bin/flink`), with the cluster's conf dir (its Java options) and `-m`
 * pointing at the gateway: what a user's `flink run -m <gateway>` does.
 */
export async function flinkCli(
  cluster: StandaloneCluster,
  gatewayUrl: string,
  args: string[],
): Promise<{ status: number | null; out: string }> {
  const hostPort = new URL(gatewayUrl).host;
  const [command, ...rest] = args;
  const r = await runProcess('bash', [join(cluster.home, 'bin', 'flink'), command!, '-m', hostPort, ...rest], {
    env: { ...StandaloneCluster.scriptEnv(cluster.home, cluster.dir), JVM_ARGS: '-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1' },
    timeoutMs: 120_000,
    cwd: cluster.dir,
  });
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}
