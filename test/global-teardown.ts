import { rmSync } from 'node:fs';
import type { EmbeddedCluster } from '../src/cluster/embedded-cluster';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __EMBEDDED_FLINK__?: EmbeddedCluster }).__EMBEDDED_FLINK__?.stop();
  if (process.env.E2E_TOKEN_BRIDGE_DIR) rmSync(process.env.E2E_TOKEN_BRIDGE_DIR, { recursive: true, force: true });
}
