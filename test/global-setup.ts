import pino from 'pino';
import { EmbeddedCluster } from '../src/cluster/embedded-cluster';
import { projectRoot } from '../src/project-root';

/**
 * One real Flink session cluster per test run, shared by the e2e tests (they isolate themselves by
 * job id and jar id). Its URL reaches the workers through the environment.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.SKIP_EMBEDDED_FLINK === '1') return;
  const log = pino({ level: process.env.E2E_FLINK_LOG === '1' ? 'debug' : 'warn' });
  const started = performance.now();
  const cluster = await EmbeddedCluster.start({
    rootDir: projectRoot(__dirname),
    jvmOptions: ['-Xmx768m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'],
    slots: 4,
    startupTimeoutMs: 300_000,
    log,
  });
  (globalThis as { __EMBEDDED_FLINK__?: EmbeddedCluster }).__EMBEDDED_FLINK__ = cluster;
  process.env.E2E_FLINK_URL = cluster.restUrl;
  process.env.E2E_FLINK_UPLOAD_DIR = cluster.uploadDir;
  process.stderr.write(`\nembedded Flink ready at ${cluster.restUrl} in ${Math.round(performance.now() - started)} ms\n`);
}
