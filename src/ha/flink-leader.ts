import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, systemClock, type TimerHandle } from '../clock';
import type { ZooKeeperSession, ZooKeeperSettings } from './zookeeper';

/** A leader record as Flink writes it: the leader's address and its leader session id. */
export interface LeaderRecord {
  address: string;
  sessionId: string;
}

/**
 * Decodes the data of a Flink ZooKeeper leader node (`…/leader/<component>/connection_info`):
 * Java serialization of `writeUTF(address)` then `writeObject(UUID)` (ZooKeeperUtils
 * .writeLeaderInformationToZooKeeper, the same in 1.20 and 2.0–2.3). Empty data: no leader.
 * Returns undefined for anything else, which the follower treats as "no leader known".
 */
export function decodeLeaderRecord(data: Buffer): LeaderRecord | undefined {
  // STREAM_MAGIC ACED, version 0005, TC_BLOCKDATA 77 <len>, then the UTF: u16 length + bytes.
  if (data.length < 9 || data.readUInt16BE(0) !== 0xaced || data.readUInt16BE(2) !== 5 || data[4] !== 0x77) return undefined;
  const utfLength = data.readUInt16BE(6);
  if (8 + utfLength > data.length) return undefined;
  // Modified UTF-8 equals UTF-8 for the addresses Flink writes (no NUL, no supplementary characters).
  const address = data.subarray(8, 8 + utfLength).toString('utf8');
  // java.util.UUID's fields in serialization order (by name): leastSigBits, then mostSigBits; its last 16 bytes.
  const rest = data.subarray(8 + utfLength);
  if (rest.length < 16 || !rest.includes(Buffer.from('java.util.UUID'))) return undefined;
  const least = rest.subarray(rest.length - 16, rest.length - 8).toString('hex');
  const most = rest.subarray(rest.length - 8).toString('hex');
  const hex = most + least;
  const sessionId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { address, sessionId };
}

/** `host:port` of an RPC address as Flink publishes it (`pekko.tcp://flink@host:port/user/rpc/dispatcher_1`, or akka in older Flink). */
export function rpcEndpointOf(address: string): { host: string; port: number } | undefined {
  const m = /^[a-z]+(?:\.[a-z]+)?:\/\/[^@/]+@(\[[^\]]+\]|[^:/]+):(\d+)(?:\/|$)/i.exec(address);
  return m ? { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) } : undefined;
}

/** Who this gateway's JobManager is, as it appears in the leader record: its RPC host and (when fixed) port. */
export interface JobManagerIdentity {
  host: string;
  /** Undefined when the JobManager's RPC port is not one fixed number (a range, or 0 = any). */
  port?: number;
}

export function isLeaderRecordOf(record: LeaderRecord | undefined, self: JobManagerIdentity): boolean {
  const ep = record ? rpcEndpointOf(record.address) : undefined;
  return ep !== undefined && ep.host === self.host && (self.port === undefined || ep.port === self.port);
}

/**
 * The identity of a JobManager from its own configuration (GET /v1/jobmanager/config, which each
 * JobManager answers from its own process, a standby too): `jobmanager.rpc.address` and, with
 * HA, `high-availability.jobmanager.port` (the port its leader record names) when it is one number.
 */
export function identityFromConfig(entries: readonly { key: string; value: string }[]): JobManagerIdentity | undefined {
  const get = (k: string) => entries.find((e) => e.key === k)?.value?.trim();
  const host = get('jobmanager.rpc.address');
  if (!host) return undefined;
  const port = get('high-availability.jobmanager.port') ?? get('jobmanager.rpc.port');
  return { host, ...(port && /^[1-9]\d*$/.test(port) ? { port: Number(port) } : {}) };
}

/** The ZooKeeper path of a component's leader record: `<namespace>/leader/<component>/connection_info`. */
export function leaderPath(
  settings: Pick<ZooKeeperSettings, 'namespace'>,
  component: 'dispatcher' | 'resource_manager' | 'rest_server',
): string {
  return `${settings.namespace}/leader/${component}/connection_info`;
}

export interface LeaderState {
  leading: boolean;
  /** The current leader's record (undefined while none is known). */
  record?: LeaderRecord;
}

/** What the follower needs of a ZooKeeper session (a fake in unit tests). */
export interface LeaderRecordSession extends Pick<ZooKeeperSession, 'settings' | 'isConnected' | 'getData' | 'exists'> {
  on(event: 'up' | 'down', listener: () => void): unknown;
  off(event: 'up' | 'down', listener: () => void): unknown;
}

export interface FlinkLeaderFollowerOptions {
  /** Timers for retrying a failed read (injected in tests). */
  clock?: Clock;
  /** How long after a failed read to read again; default 1 s. */
  retryMs?: number;
}

const READ_RETRY_MS = 1_000;

/**
 * Whether a follower's new state is news for its listeners (this JobManager gained or lost the lead,
 * or a new leader session began); logs it once when it is. Shared by the ZooKeeper and Kubernetes followers.
 */
export function announceLeaderChange(prev: LeaderState, next: LeaderState, self: JobManagerIdentity, log: Logger): boolean {
  if (prev.leading === next.leading && prev.record?.sessionId === next.record?.sessionId) return false;
  log.info(
    { leading: next.leading, leader: next.record?.address, leaderSessionId: next.record?.sessionId, self },
    next.leading ? "this gateway's JobManager leads the cluster" : "this gateway's JobManager does not lead the cluster",
  );
  return true;
}

/**
 * Follows Flink's own leader election through its HA records (no election of the gateway's own):
 * the gateway is "leading" while the dispatcher's leader record names its JobManager and the
 * ZooKeeper session is up. The dispatcher, resource manager and REST endpoint of one JobManager
 * process share one leadership (and one leader session id), and the resource manager is where
 * Flink's delegation-token manager, and so the token bridge, runs.
 *
 * The record is an ephemeral node of the leader's ZooKeeper session: when a leader dies it
 * disappears, and the next leader creates it anew. The follower never ends a read without a
 * watch on the node that will tell it about the next change, and reads again when a read fails
 * (its watch may not have been set): a missed change would leave the new leader's gateway a
 * standby for as long as that leader lives, with no gateway obtaining any job's tokens.
 */
export class FlinkLeaderFollower extends EventEmitter<{ change: [LeaderState] }> {
  private state: LeaderState = { leading: false };
  private stopped = false;
  private reads = 0;
  private retry: TimerHandle | undefined;
  private readonly path: string;
  private readonly clock: Clock;
  private readonly retryMs: number;

  constructor(
    private readonly session: LeaderRecordSession,
    private readonly self: JobManagerIdentity,
    private readonly log: Logger,
    opts: FlinkLeaderFollowerOptions = {},
  ) {
    super();
    this.path = leaderPath(session.settings, 'dispatcher');
    this.clock = opts.clock ?? systemClock;
    this.retryMs = opts.retryMs ?? READ_RETRY_MS;
    session.on('up', this.onUp);
    session.on('down', this.onDown);
  }

  get current(): LeaderState {
    return this.state;
  }

  /** Reads the record now and follows it from then on. Never rejects: a failed read is logged and retried. */
  async start(): Promise<void> {
    await this.read().catch((err: unknown) => this.readFailed(err));
  }

  stop(): void {
    this.stopped = true;
    this.retry?.cancel();
    this.retry = undefined;
    this.session.off('up', this.onUp);
    this.session.off('down', this.onDown);
  }

  private readonly onUp = () => this.readAgain();
  private readonly onDown = () => this.set({ leading: false });

  /** A read for a watch, a new session or a retry; a failure is retried. */
  private readonly readAgain = () => void this.read().catch((err: unknown) => this.readFailed(err));

  /**
   * A failed read may have set no watch, and then nothing would ever read the record again: read
   * again after `retryMs`. A lost session needs no retry here: its `up` reads again.
   */
  private readFailed(err: unknown): void {
    if (this.stopped) return;
    this.log.warn(
      { err: (err as Error)?.message, retryInMs: this.retryMs },
      'cannot read the Flink leader record; reading it again shortly',
    );
    if (this.retry) return;
    this.retry = this.clock.setTimer(() => {
      this.retry = undefined;
      this.readAgain();
    }, this.retryMs);
  }

  private async read(): Promise<void> {
    if (this.stopped || !this.session.isConnected) return;
    // Reads may overlap (a watch fires while one is in flight): only the latest one decides.
    const seq = ++this.reads;
    for (;;) {
      const node = await this.session.getData(this.path, this.readAgain);
      if (node) {
        const record = decodeLeaderRecord(node.data);
        if (seq === this.reads) this.set({ leading: isLeaderRecordOf(record, this.self), ...(record ? { record } : {}) });
        return;
      }
      // No record (no leader elected yet): ZooKeeper sets no watch on a node getData did not find,
      // so `exists` sets one to wait for it. A record created between the two calls is found by
      // `exists`, whose watch then fires only on that record's next change — and a leader writes
      // its record once — so read it now rather than conclude "no leader" until the next failover.
      if (!(await this.session.exists(this.path, this.readAgain))) {
        if (seq === this.reads) this.set({ leading: false });
        return;
      }
      if (seq !== this.reads) return;
    }
  }

  private set(next: LeaderState): void {
    if (this.stopped) return;
    const prev = this.state;
    this.state = next;
    if (announceLeaderChange(prev, next, this.self, this.log)) this.emit('change', next);
  }
}
