import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, systemClock, type TimerHandle } from '../clock';
import { announceLeaderChange, isLeaderRecordOf, type JobManagerIdentity, type LeaderRecord, type LeaderState } from './flink-leader';
import { type ConfigMap, type KubernetesClient, kubeError, type Watch } from './kubernetes-client';
import { clusterConfigMapName, type KubernetesHaSettings, LEADER_KEY_PREFIX } from './kubernetes-settings';
import type { LeaderFollowing } from './shared-store';

/**
 * A leader record of Flink's Kubernetes HA: the data key `org.apache.flink.k8s.leader.<component>`
 * of `<cluster-id>-cluster-config-map`, `<leaderSessionId>,<address>` (KubernetesUtils
 * .encodeLeaderInformation, the same in 1.20 and 2.x). Undefined when absent or malformed.
 */
export function leaderRecordOf(
  cm: ConfigMap | undefined,
  component: 'dispatcher' | 'resourcemanager' | 'restserver' = 'dispatcher',
): LeaderRecord | undefined {
  const value = cm?.data?.[`${LEADER_KEY_PREFIX}${component}`];
  const comma = value?.indexOf(',') ?? -1;
  if (!value || comma < 0) return undefined;
  const sessionId = value.slice(0, comma);
  const address = value.slice(comma + 1);
  return /^[0-9a-f-]{36}$/i.test(sessionId) && address ? { sessionId, address } : undefined;
}

export interface KubernetesLeaderFollowerOptions {
  clock?: Clock;
}

/**
 * Follows Flink's own leader election on Kubernetes (no election of the gateway's own): the
 * gateway leads while the dispatcher's leader record in `<cluster-id>-cluster-config-map` names
 * its JobManager (its RPC address, as on ZooKeeper: the REST address a JobManager publishes is the
 * loopback one it is bound to behind its gateway, the same for every replica) and while the API
 * server answers. Who holds fabric8's lock (the annotation's random `holderIdentity`) is not
 * looked at: the data keys say who leads.
 *
 * The ConfigMap is watched (a change is seen at once) and read again every retry period (Flink's
 * `leader-election.retry-period`, at most 5 s): the read is also how an API server out of reach is
 * noticed. When nothing was read for Flink's renew deadline the gateway steps down, as Flink's
 * JobManager does when it cannot renew its lease; the next successful read decides again.
 */
export class KubernetesLeaderFollower extends EventEmitter<{ change: [LeaderState] }> implements LeaderFollowing {
  private state: LeaderState = { leading: false };
  private stopped = false;
  private timer: TimerHandle | undefined;
  private watch: Watch | undefined;
  private lastContact: number | undefined;
  private lastRecord: LeaderRecord | undefined;
  private resourceVersion = '';
  private failing = false;
  private readonly name: string;
  private readonly clock: Clock;
  private readonly periodMs: number;

  constructor(
    private readonly client: KubernetesClient,
    private readonly settings: KubernetesHaSettings,
    private readonly self: JobManagerIdentity,
    private readonly log: Logger,
    opts: KubernetesLeaderFollowerOptions = {},
  ) {
    super();
    this.name = clusterConfigMapName(settings.clusterId);
    this.clock = opts.clock ?? systemClock;
    this.periodMs = Math.max(200, Math.min(settings.retryPeriodMs, 5_000));
  }

  get current(): LeaderState {
    return this.state;
  }

  async start(): Promise<void> {
    await this.tick();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.watch?.stop();
  }

  /** One read of the ConfigMap, then the next one a period later; the watch is (re)started when none runs. */
  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      const cm = await this.client.getConfigMap(this.settings.namespace, this.name);
      this.contact();
      if (this.failing) this.log.info({ server: this.client.connection.server }, 'the Kubernetes API server answers again');
      this.failing = false;
      this.apply(cm);
      if (cm?.metadata.resourceVersion && !this.watch) {
        this.resourceVersion = cm.metadata.resourceVersion;
        this.follow();
      }
    } catch (err) {
      if (!this.failing)
        this.log.warn(
          { err: (err as Error).message, status: kubeError(err)?.status },
          "cannot read Flink's leader ConfigMap; reading it again every retry period",
        );
      this.failing = true;
      this.checkDeadline();
    }
    if (!this.stopped) this.timer = this.clock.setTimer(() => void this.tick(), this.periodMs);
  }

  private follow(): void {
    if (this.stopped) return;
    const watch = this.client.watchConfigMaps(
      this.settings.namespace,
      { fieldSelector: `metadata.name=${this.name}`, resourceVersion: this.resourceVersion, timeoutSeconds: 300 },
      (e) => {
        if (e.object.metadata.resourceVersion) this.resourceVersion = e.object.metadata.resourceVersion;
        this.contact();
        if (e.type === 'BOOKMARK') return;
        this.apply(e.type === 'DELETED' ? undefined : e.object);
      },
    );
    this.watch = watch;
    // However it ends, the next tick starts a new one (from the version then read).
    const ended = () => {
      if (this.watch === watch) this.watch = undefined;
    };
    watch.done.then(ended, ended);
  }

  private contact(): void {
    this.lastContact = this.clock.monotonicMs();
  }

  /** Past Flink's renew deadline without a read: step down (keeping the last record known). */
  private checkDeadline(): void {
    if (this.lastContact !== undefined && this.clock.monotonicMs() - this.lastContact < this.settings.renewDeadlineMs) return;
    if (this.state.leading)
      this.log.warn(
        { renewDeadlineMs: this.settings.renewDeadlineMs },
        "the Kubernetes API server has not answered for the renew deadline; stepping down as Flink's JobManager does",
      );
    this.set({ leading: false, ...(this.lastRecord ? { record: this.lastRecord } : {}) });
  }

  private apply(cm: ConfigMap | undefined): void {
    const record = leaderRecordOf(cm);
    this.lastRecord = record;
    this.set({ leading: isLeaderRecordOf(record, this.self), ...(record ? { record } : {}) });
  }

  private set(next: LeaderState): void {
    if (this.stopped) return;
    const prev = this.state;
    this.state = next;
    if (announceLeaderChange(prev, next, this.self, this.log)) this.emit('change', next);
  }
}
