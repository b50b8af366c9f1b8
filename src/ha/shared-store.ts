import type { Logger } from 'pino';
import type { Claim, JobClaimBook } from '../submission/job-claims';
import type { RegistrationStore, StoredRegistration } from '../submission/registration-store';
import type { JobManagerIdentity, LeaderState } from './flink-leader';
import type { SealFailure } from './record-seal';

/**
 * The job registrations every replica of an HA cluster shares (ADR 0012), on whichever engine the
 * cluster's own HA data lives: ZooKeeper (zookeeper-store.ts) or Kubernetes ConfigMaps
 * (kubernetes-store.ts). One contract, run over both (test/ha/store-contract.test.ts):
 * - `put` is stored where every replica reads it before it resolves; `remove(jobId, attempt)`
 *   removes only the record that attempt wrote (compare-and-delete), so a rolled-back attempt on
 *   one replica never strips a retry another replica stored meanwhile;
 * - every replica keeps a mirror (`list`/`get` from memory) and hears of other replicas' changes
 *   as `added`, `updated`, `removed`; a record that does not parse (or does not verify) is ignored;
 * - a read that fails is retried until it succeeds, so no change is missed for good.
 */
export interface SharedRegistrationStore extends RegistrationStore {
  readonly shared: true;
  on(event: 'added' | 'updated', listener: (rec: StoredRegistration) => void): unknown;
  on(event: 'removed', listener: (jobId: string) => void): unknown;
  /** Reads the store again (a new leader does before registering what it holds); rejects when it cannot. */
  sync(full?: boolean): Promise<void>;
}

/**
 * Job-id claims shared by the replicas: created atomically, so a retry on any replica is a retry
 * and anyone else's run under a used id is a conflict (job-claims.ts's rule); an expired claim is
 * replaced only by one replica (conditional on its version).
 */
export interface SharedJobClaims extends JobClaimBook {
  /** Removes the claims older than the retention; returns how many. */
  prune(): Promise<number>;
}

/** Follows Flink's own leader record for one JobManager (ZooKeeper: FlinkLeaderFollower; Kubernetes: KubernetesLeaderFollower). */
export interface LeaderFollowing {
  readonly current: LeaderState;
  on(event: 'change', listener: (state: LeaderState) => void): unknown;
  /** Reads the record now and follows it; never rejects (a failed read is retried). */
  start(): Promise<void>;
  stop(): void;
}

/** Makes the follower once the gateway knows who its JobManager is. */
export type FollowLeader = (self: JobManagerIdentity, log: Logger) => LeaderFollowing;

/** The kinds of record the gateway keeps, as sealed (part of what the MAC covers): the same strings on every engine. */
export const RECORD_KIND = { registration: 'registration', claim: 'job-claim' } as const;

/** A shared record that did not open or parse: told to the metrics (flink_gateway_ha_records_rejected_total); the store logs it. */
export type RejectedRecord = (kind: string, reason: SealFailure | 'malformed') => void;

/** Whether a record's JSON is a claim of the job `jobId` (a claim stored under another job's name binds nothing). */
export function isClaimOf(jobId: string, value: unknown): value is Claim {
  const c = value as Partial<Claim> | null;
  return (
    !!c &&
    typeof c === 'object' &&
    c.jobId === jobId &&
    typeof c.principal === 'string' &&
    typeof c.fingerprint === 'string' &&
    typeof c.at === 'number'
  );
}
