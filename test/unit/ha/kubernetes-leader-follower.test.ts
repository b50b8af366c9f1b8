import { KubernetesApiError, type ConfigMap, type KubernetesClient, type WatchEvent } from '../../../src/ha/kubernetes-client';
import { KubernetesLeaderFollower } from '../../../src/ha/kubernetes-leader';
import type { KubernetesHaSettings } from '../../../src/ha/kubernetes-settings';
import { flush, ManualClock } from '../../helpers/manual-clock';
import { captureLogger } from '../../helpers/token-fakes';

const SETTINGS: KubernetesHaSettings = {
  clusterId: 'c',
  namespace: 'ns',
  leaseDurationMs: 6000,
  renewDeadlineMs: 4000,
  retryPeriodMs: 1000,
};
const OWN = 'pekko.tcp://flink@10.0.0.1:6123/user/rpc/dispatcher_1';
const OTHER = 'pekko.tcp://flink@10.0.0.2:6123/user/rpc/dispatcher_1';
const SESSION = '5c0b7e4e-8a51-4e0e-a3d5-0d6f1b2c3d4e';

/**
 * The API server as the follower sees it (a fault that cannot be timed on a real server without
 * sleeping: the renew deadline passing). The real-server behaviour is test/ha/kubernetes-ha.test.ts.
 */
class FakeApi {
  leader: string | undefined = OTHER;
  down = false;
  version = 1;
  onEvent: ((e: WatchEvent) => void) | undefined;
  readonly connection = { server: 'https://api.test', source: 'fake' };

  configMap(): ConfigMap {
    return {
      metadata: { name: 'c-cluster-config-map', resourceVersion: String(this.version) },
      data: this.leader ? { 'org.apache.flink.k8s.leader.dispatcher': `${SESSION},${this.leader}` } : {},
    };
  }
  async getConfigMap(): Promise<ConfigMap | undefined> {
    if (this.down) throw new KubernetesApiError(0, 'Unreachable', 'connection refused', 'get', 'configmaps/c-cluster-config-map');
    return this.configMap();
  }
  watchConfigMaps(_ns: string, _q: unknown, onEvent: (e: WatchEvent) => void) {
    this.onEvent = onEvent;
    return { stop: () => (this.onEvent = undefined), done: new Promise<void>(() => undefined) };
  }
  /** Flink's leader changes: the watch tells at once. */
  elect(address: string): void {
    this.leader = address;
    this.version++;
    this.onEvent?.({ type: 'MODIFIED', object: this.configMap() });
  }
}

describe("following Flink's leader ConfigMap (a fake API server, an injected clock)", () => {
  it('leads while the record names its JobManager; a change seen through the watch decides at once', async () => {
    const api = new FakeApi();
    const clock = new ManualClock();
    const { log } = captureLogger();
    const f = new KubernetesLeaderFollower(api as unknown as KubernetesClient, SETTINGS, { host: '10.0.0.1', port: 6123 }, log, { clock });
    const changes: boolean[] = [];
    f.on('change', (s) => changes.push(s.leading));
    await f.start();
    expect(f.current).toMatchObject({ leading: false, record: { address: OTHER, sessionId: SESSION } });
    api.elect(OWN);
    expect(f.current.leading).toBe(true);
    api.elect(OTHER);
    expect(changes).toEqual([false, true, false]);
    f.stop();
  });

  it('steps down once the API server has not answered for the renew deadline, and leads again when it answers', async () => {
    const api = new FakeApi();
    api.leader = OWN;
    const clock = new ManualClock();
    const { log, messages } = captureLogger();
    const f = new KubernetesLeaderFollower(api as unknown as KubernetesClient, SETTINGS, { host: '10.0.0.1', port: 6123 }, log, { clock });
    await f.start();
    expect(f.current.leading).toBe(true);
    api.down = true;
    // Within the renew deadline a failed read changes nothing (Flink's JobManager still holds its lease).
    await clock.advance(3000);
    await flush();
    expect(f.current.leading).toBe(true);
    await clock.advance(1000);
    await flush();
    expect(f.current).toMatchObject({ leading: false, record: { address: OWN } });
    expect(messages('warn')).toEqual(expect.arrayContaining([expect.stringContaining('renew deadline')]));
    api.down = false;
    await clock.advance(1000);
    await flush();
    expect(f.current.leading).toBe(true);
    f.stop();
  });
});
