import type { EmbeddedCluster } from '../src/cluster/embedded-cluster';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __EMBEDDED_FLINK__?: EmbeddedCluster }).__EMBEDDED_FLINK__?.stop();
}
