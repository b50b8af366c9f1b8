import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { EmbeddedCluster } from '../src/cluster/embedded-cluster';
import { projectRoot } from '../src/project-root';

/**
 * One real Flink session cluster per test run, shared by the e2e tests (they isolate themselves by
 * job id and jar id). Its URL reaches the workers through the environment.
 */
export default async function globalSetup(): Promise<void> {
  const log = pino({ level: process.env.E2E_FLINK_LOG === '1' ? 'debug' : 'warn' });
  // The Java modules (the token bridge, embedded-flink) are built here, once, before any
  // worker starts, also when the cluster itself is skipped: suites in parallel workers that need
  // them (the HA failover files, the distribution matrix) would otherwise run Maven at once on one
  // target directory. A no-op when the build is current. Without the cluster, a failed build is left
  // to the suites that need it (they report it themselves); the others run.
  const skip = process.env.SKIP_EMBEDDED_FLINK === '1';
  try {
    EmbeddedCluster.ensureBuilt(projectRoot(__dirname), log);
  } catch (err) {
    if (!skip) throw err;
    process.stderr.write(`\n${(err as Error).message}\n`);
  }
  if (skip) return;
  const started = performance.now();
  // The cluster outlives every test gateway, so its token bridge cannot be given a gateway URL up
  // front: it reads the URL from a file a test writes once its gateway listens (and removes after),
  // and the bridge secret from a file that gateway creates (gateway.tokens.bridge-secret-file).
  // Until then it polls nothing. test/e2e/token-delivery.test.ts uses it.
  const bridgeDir = mkdtempSync(join(tmpdir(), 'gw-e2e-token-bridge-'));
  process.env.E2E_TOKEN_BRIDGE_DIR = bridgeDir;
  const cluster = await EmbeddedCluster.start({
    rootDir: projectRoot(__dirname),
    // Headroom for the suites sharing it at once under load (jobs of two workers, the load test's 16 runs,
    // long-running token probes): a starved cluster fails jobs for reasons that are not the gateway's.
    jvmOptions: ['-Xmx1024m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'],
    slots: 8,
    startupTimeoutMs: 300_000,
    log,
    flinkConfig: {
      'security.delegation.token.provider.gateway.url-file': join(bridgeDir, 'url'),
      'security.delegation.token.provider.gateway.secret-file': join(bridgeDir, 'bridge-secret'),
      'security.delegation.token.provider.gateway.poll-interval': '500 ms',
      // No other token provider runs here, so nothing is re-obtained needlessly: keep first tokens quick.
      'security.delegation.token.provider.gateway.idle-interval': '2 s',
      // A failed push to the TaskManager would otherwise pause delivery for Flink's default 1 h.
      'security.delegation.tokens.renewal.retry.backoff': '1 s',
      'classloader.parent-first-patterns.additional': 'dev.flinkjargateway.tokens.',
      // With every slot taken for a moment (the suites share this cluster), a standalone resource
      // manager past its start-up period fails a streaming job's slot request at once
      // (NoResourceAvailableException). Within it, the request waits for a slot to free
      // (slot.request.timeout), as a job on a busy real session cluster with more TaskManagers coming would.
      'resourcemanager.standalone.start-up-time': '2 h',
    },
  });
  (globalThis as { __EMBEDDED_FLINK__?: EmbeddedCluster }).__EMBEDDED_FLINK__ = cluster;
  process.env.E2E_FLINK_URL = cluster.restUrl;
  process.env.E2E_FLINK_UPLOAD_DIR = cluster.uploadDir;
  process.stderr.write(`\nembedded Flink ready at ${cluster.restUrl} in ${Math.round(performance.now() - started)} ms\n`);
}
