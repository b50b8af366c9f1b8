import type { Logger } from 'pino';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import type { JobWatcher } from '../cluster/job-watcher';
import type { JobRegistrations } from '../submission/job-registrations';
import type { TokenManager } from '../plugin-kit/token-spi';
import { identityFromConfig, type JobManagerIdentity, type LeaderState } from './flink-leader';
import type { FollowLeader, LeaderFollowing, SharedJobClaims, SharedRegistrationStore } from './shared-store';

const PRUNE_INTERVAL_MS = 3600_000;

/** What the coordinator uses of each collaborator (fakes in unit tests). */
export interface HaCoordinatorOptions {
  /** The engine's connection (a ZooKeeper session, a Kubernetes API client): started first, closed last. */
  session: { start(): Promise<void>; close(): void };
  /** Follows Flink's leader record for this gateway's JobManager, once it is known. */
  follow: FollowLeader;
  /** What the engine is called in log lines (`ZooKeeper`, `the Kubernetes API server`). */
  engine?: string;
  store: SharedRegistrationStore;
  /** Pruned of expired claims by the leader's gateway: on becoming it, then hourly. */
  claims?: Pick<SharedJobClaims, 'prune'>;
  registrations: Pick<JobRegistrations, 'sharedStored' | 'sharedRemoved' | 'restore' | 'deactivate' | 'list'>;
  tokens: Pick<TokenManager, 'start' | 'stop'>;
  cluster: Pick<JobManagerClient, 'json'>;
  /** Started while this gateway leads, stopped when it stops leading. */
  watcher?: Pick<JobWatcher, 'start' | 'stop'>;
  readStates: () => Promise<Map<string, string>>;
  log: Logger;
  /** How often to ask the JobManager who it is until it answers. */
  identityRetryMs?: number;
}

/** What the status route shows of the HA role. */
export interface HaStatus {
  store: string;
  leading: boolean;
  jobManager?: JobManagerIdentity;
  leader?: string;
  leaderSessionId?: string;
  /** ISO-8601: when this gateway last became the leader's. */
  leadingSince?: string;
}

/**
 * The gateways of an HA cluster as one (ADR 0012). Each follows Flink's own leader election
 * through its HA records (FlinkLeaderFollower), never one of its own. The gateway next to the
 * leading JobManager — whose resource manager runs Flink's delegation-token manager and so pulls
 * tokens through the token bridge from this gateway — is the one that obtains and renews tokens:
 * on becoming it, it reads every registration from the shared store, registers the running ones
 * (and the ones another replica is still submitting), starts the token manager and the job
 * watcher; while it is it, it registers what other replicas store and drops what they remove; on
 * ceasing to be it (another leader, or its ZooKeeper session lost or the Kubernetes API server out
 * of reach past Flink's renew deadline, as Flink's JobManager itself gives up leadership then) it stops both and keeps nothing, the store keeps everything.
 */
export class HaCoordinator {
  private follower: LeaderFollowing | undefined;
  private transitions: Promise<void> = Promise.resolve();
  private leading = false;
  private leadingSince: number | undefined;
  private identity: JobManagerIdentity | undefined;
  private stopped = false;
  private identityTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: HaCoordinatorOptions) {
    opts.store.on('added', (rec) => this.inOrder(() => (this.leading ? opts.registrations.sharedStored(rec) : undefined)));
    opts.store.on('updated', (rec) => this.inOrder(() => (this.leading ? opts.registrations.sharedStored(rec) : undefined)));
    opts.store.on('removed', (jobId) => this.inOrder(() => (this.leading ? opts.registrations.sharedRemoved(jobId) : undefined)));
  }

  /** Whether this gateway obtains tokens now (JobRegistrations' `active`). */
  isLeading(): boolean {
    return this.leading;
  }

  status(): HaStatus {
    const rec = this.follower?.current.record;
    return {
      store: this.opts.store.where,
      leading: this.leading,
      ...(this.identity ? { jobManager: this.identity } : {}),
      ...(rec ? { leader: rec.address, leaderSessionId: rec.sessionId } : {}),
      ...(this.leadingSince !== undefined ? { leadingSince: new Date(this.leadingSince).toISOString() } : {}),
    };
  }

  /**
   * Connects to the engine (ZooKeeper, the Kubernetes API server) and learns who its JobManager is. Neither has to succeed at once: until
   * both did, the gateway serves as a standby (runs are stored for the leader's gateway; a store it
   * cannot reach is a 503).
   */
  async start(): Promise<void> {
    await this.opts.session.start().catch((err: unknown) => {
      // A missing permission does not heal by waiting: start-up fails, naming it.
      if ((err as { code?: unknown } | null)?.code === 'GW_HA_STORE_FORBIDDEN') throw err;
      this.opts.log.warn(
        { err: (err as Error).message },
        `${this.opts.engine ?? 'ZooKeeper'} is not reachable yet; serving as a standby until it is`,
      );
    });
    await this.opts.store.init().catch((err: unknown) => {
      // A subtree the gateways do not own stops start-up; anything else is retried.
      if ((err as { code?: unknown } | null)?.code === 'GW_CONFIG_INVALID') throw err;
      this.opts.log.warn({ err: (err as Error).message }, 'cannot read the shared job registrations yet');
    });
    await this.learnIdentity();
  }

  private async learnIdentity(): Promise<void> {
    if (this.stopped) return;
    try {
      const res = await this.opts.cluster.json('GET', '/v1/jobmanager/config', { operation: 'JobManager configuration' });
      const identity =
        res.status === 200 && Array.isArray(res.body) ? identityFromConfig(res.body as { key: string; value: string }[]) : undefined;
      if (!identity) throw new Error(`the JobManager's configuration names no jobmanager.rpc.address (HTTP ${res.status})`);
      this.identity = identity;
      this.opts.log.info({ jobManager: identity }, "following Flink's leader election for this JobManager");
      const follower = this.opts.follow(identity, this.opts.log.child({ component: 'flink-leader' }));
      this.follower = follower;
      follower.on('change', (state) => this.inOrder(() => this.apply(state)));
      await follower.start();
    } catch (err) {
      this.opts.log.warn({ err: (err as Error).message }, 'cannot learn who this JobManager is yet; retrying (a standby meanwhile)');
      this.identityTimer = setTimeout(() => void this.learnIdentity(), this.opts.identityRetryMs ?? 1_000);
    }
  }

  private inOrder(step: () => Promise<void> | undefined): void {
    this.transitions = this.transitions.then(step).catch((err: unknown) => this.opts.log.error({ err }, 'HA transition failed'));
  }

  private async apply(state: LeaderState): Promise<void> {
    if (this.stopped || state.leading === this.leading) return;
    const { registrations, tokens, watcher, log } = this.opts;
    if (state.leading) {
      const started = performance.now();
      this.leading = true;
      this.leadingSince = Date.now();
      // A failed re-read must not stop the takeover half-way (leading, yet no job registered and no
      // token obtained, with nothing to try again): the jobs this replica has followed are
      // registered now, and the ones the re-read misses arrive as `added` once the store's own
      // retry reads them.
      await this.opts.store
        .sync()
        .catch((err: unknown) =>
          log.warn(
            { err: (err as Error).message },
            'cannot re-read the shared job registrations on taking over; registering the ones this replica has followed, the others once the store reads them',
          ),
        );
      await registrations.restore(this.opts.readStates);
      await tokens.start();
      watcher?.start();
      this.pruneClaims();
      this.pruneTimer = setInterval(() => this.pruneClaims(), PRUNE_INTERVAL_MS);
      this.pruneTimer.unref();
      log.info(
        { jobs: registrations.list().length, leaderSessionId: state.record?.sessionId, ms: Math.round(performance.now() - started) },
        'leading: every stored job is registered here and its tokens are obtained here',
      );
    } else {
      this.leading = false;
      this.leadingSince = undefined;
      clearInterval(this.pruneTimer);
      await watcher?.stop();
      await tokens.stop();
      registrations.deactivate();
      log.info(
        { leader: state.record?.address },
        "standby: tokens are obtained by the leading JobManager's gateway; runs here are stored for it",
      );
    }
  }

  private pruneClaims(): void {
    this.opts.claims
      ?.prune()
      .then((removed) => removed > 0 && this.opts.log.info({ removed }, 'expired job id claims removed from the shared store'))
      .catch((err: unknown) => this.opts.log.warn({ err: (err as Error).message }, 'cannot prune the expired job id claims'));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.pruneTimer);
    if (this.identityTimer) clearTimeout(this.identityTimer);
    this.follower?.stop();
    await this.transitions;
    this.opts.session.close();
  }
}
