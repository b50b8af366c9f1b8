import type { Logger } from 'pino';
import { ConfigError } from '../config/registry';
import type { Claim, ClaimResult, JobClaimBook } from '../submission/job-claims';
import { parseStoredRegistration, type StoredRegistration } from '../submission/registration-store';
import type { RecordSeal } from './record-seal';
import { type MirrorOptions, RegistrationMirror } from './registration-mirror';
import { isClaimOf, RECORD_KIND, type RejectedRecord } from './shared-store';
import { type AclEntry, BAD_VERSION, NO_AUTH, NODE_EXISTS, NO_NODE, OPEN_ACL, sameAcl, type ZooKeeperSession, zkCode } from './zookeeper';

/**
 * The gateway's nodes inside the cluster's ZooKeeper namespace. Closed to everyone but the
 * gateways' digest identity, so Flink's (or the operator's) clean-up of the namespace cannot
 * remove them: the ADR on the authenticated store says how to.
 */
export function gatewayRoot(namespace: string): string {
  return `${namespace}/flink-jar-gateway`;
}

/** What the stores need of a session to create their nodes closed (a fake in unit tests). */
export type NodeSession = Pick<ZooKeeperSession, 'settings' | 'acl' | 'mkdirp' | 'create' | 'getACL' | 'setACL'>;

const describeAcl = (acl: readonly AclEntry[]) => acl.map((e) => `${e.scheme}:${e.id.replace(/:.*/, ':…')}:${e.perms}`).join(',');

/**
 * Creates the gateway's nodes `paths` (parents first) with the session's ACL, under the cluster's
 * namespace created open as Flink creates it. A node that exists with another ACL — left open by
 * a gateway without a shared secret, or created by someone else first — is closed when its ACL
 * lets this identity change it, and is a start-up problem when it does not.
 */
export async function ensureOwnNodes(session: NodeSession, paths: readonly string[], log: Logger): Promise<void> {
  await session.mkdirp(session.settings.namespace, OPEN_ACL);
  for (const path of paths) {
    try {
      await session.create(path, Buffer.alloc(0));
      continue;
    } catch (err) {
      if (zkCode(err) !== NODE_EXISTS) throw err;
    }
    // Not a passing trouble (an unreachable quorum is): start-up stops, naming the fix.
    const foreign = (acl: string) =>
      new ConfigError([
        {
          key: 'gateway.ha.shared-secret',
          source: `ZooKeeper node ${path}`,
          message: `${path} exists with an ACL that does not admit this gateway (${acl}): it was created by someone else, or by gateways with another gateway.ha.shared-secret. Use that secret, or remove the node (zkCli: deleteall ${path}, authenticated as its owner or as ZooKeeper's super user) and start again`,
        },
      ]);
    let node: Awaited<ReturnType<NodeSession['getACL']>>;
    try {
      node = await session.getACL(path);
    } catch (err) {
      // ZooKeeper answers getACL only to who may read or administer the node.
      if (zkCode(err) === NO_AUTH) throw foreign('not readable by this gateway');
      throw err;
    }
    if (!node || sameAcl(node.acl, session.acl)) continue;
    try {
      await session.setACL(path, session.acl, node.aversion);
      log.warn(
        { path, was: describeAcl(node.acl) },
        "a node of the gateway's ZooKeeper subtree was open to others; it is now closed to everyone but the gateways",
      );
    } catch (err) {
      if (zkCode(err) === NO_AUTH) throw foreign(describeAcl(node.acl));
      throw err;
    }
  }
}

const JOB_ID = /^[0-9a-f]{32}$/;

/**
 * Upgrade aid (`gateway.ha.adopt-unsealed-records`): seals in place, and closes, the records of
 * `dir` that an older gateway wrote unsealed and that read as a record of their node (`valid`).
 * Run once at start-up, right after the subtree was closed: it trusts what the store held when the
 * gateways still left it open, and nothing written later. Returns how many were adopted.
 */
export async function adoptUnsealed(
  session: NodeSession & Pick<ZooKeeperSession, 'getChildren' | 'getData' | 'setData'>,
  dir: string,
  kind: string,
  seal: RecordSeal,
  valid: (jobId: string, value: unknown) => boolean,
  log: Logger,
): Promise<number> {
  let adopted = 0;
  for (const jobId of (await session.getChildren(dir)).filter((c) => JOB_ID.test(c))) {
    const path = `${dir}/${jobId}`;
    const node = await session.getData(path);
    if (!node) continue;
    const opened = seal.open(kind, path, node.data);
    if (opened.ok || opened.reason !== 'unsealed') continue;
    const text = node.data.toString('utf8');
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      continue;
    }
    if (!valid(jobId, value)) continue;
    try {
      await session.setData(path, seal.sealBytes(kind, path, text), node.version);
    } catch (err) {
      if (zkCode(err) === BAD_VERSION || zkCode(err) === NO_NODE) continue; // changed meanwhile: not what was there before
      throw err;
    }
    // The record node itself was created open: close it too, so nobody else can replace it.
    await session.setACL(path, session.acl);
    adopted++;
  }
  if (adopted > 0)
    log.warn(
      { dir, kind, adopted },
      'gateway.ha.adopt-unsealed-records: records an older gateway left unsealed were sealed and closed; turn the option off again',
    );
  return adopted;
}

const isRegistrationOf = (jobId: string, value: unknown): boolean => {
  try {
    return parseStoredRegistration(value)?.jobId === jobId;
  } catch {
    return false;
  }
};

/** What the registration store needs of a ZooKeeper session (a fake in unit tests). */
export interface RegistrationSession
  extends NodeSession,
    Pick<ZooKeeperSession, 'isConnected' | 'getChildren' | 'getData' | 'setData' | 'remove'> {
  on(event: 'up', listener: () => void): unknown;
}

export interface ZooKeeperRegistrationStoreOptions extends MirrorOptions {
  /** Seals every record written and opens every record read (the replicas' shared secret). */
  seal: RecordSeal;
  /** Counts a record that did not open (the metrics). */
  onRejected?: RejectedRecord;
  /** Seal, at init, the registrations an older gateway left unsealed (adoptUnsealed). */
  adoptUnsealed?: boolean;
}

/**
 * The job registrations of every replica in the ZooKeeper of the HA cluster (ADR 0012): one node
 * per job, `<namespace>/flink-jar-gateway/registrations/<jobId>`, holding the same redacted JSON
 * the file store keeps. Every replica keeps a mirror, followed through ZooKeeper watches, so
 * `list` and `get` answer from memory and a conflict check sees what other replicas registered;
 * `added`, `updated` and `removed` tell the leading replica's gateway what to register or drop
 * (the mirror: registration-mirror.ts). Writes go to ZooKeeper first and are awaited: a run is
 * submitted only after its registration is stored where the next leader will find it. A read that
 * fails (a call timed out under load) may have left the list or a node without a watch, and then
 * nothing would tell this replica of their changes: it is read again shortly, until it succeeds or
 * the session is lost (whose `up` reads everything again).
 */
export class ZooKeeperRegistrationStore extends RegistrationMirror {
  private readonly dir: string;
  /** Nodes with a live data watch of this session (a list change does not re-read them). */
  private readonly watched = new Set<string>();
  private readonly seal: RecordSeal;
  private readonly onRejected: RejectedRecord | undefined;
  private ready: Promise<void> | undefined;
  private adopt: boolean;

  constructor(
    private readonly session: RegistrationSession,
    log: Logger,
    opts: ZooKeeperRegistrationStoreOptions,
  ) {
    super(log, opts);
    this.adopt = opts.adoptUnsealed ?? false;
    this.seal = opts.seal;
    this.onRejected = opts.onRejected;
    this.dir = `${gatewayRoot(session.settings.namespace)}/registrations`;
    // A new session (after expiry) has none of the old watches: read every node again.
    session.on(
      'up',
      () =>
        void this.sync(true).catch((err: unknown) =>
          this.log.warn({ err: (err as Error).message }, 'cannot read the shared job registrations'),
        ),
    );
  }

  get where(): string {
    return `zookeeper ${this.session.settings.quorum}${this.dir}`;
  }

  async init(): Promise<void> {
    await this.ensureNodes();
    if (this.adopt) {
      await adoptUnsealed(this.session, this.dir, RECORD_KIND.registration, this.seal, isRegistrationOf, this.log);
      this.adopt = false;
    }
    await this.sync(true);
  }

  /** The subtree exists and is closed; tried again by the next write when ZooKeeper was not reachable at start. */
  private ensureNodes(): Promise<void> {
    this.ready ??= ensureOwnNodes(this.session, [gatewayRoot(this.session.settings.namespace), this.dir], this.log).catch(
      (err: unknown) => {
        this.ready = undefined;
        throw err;
      },
    );
    return this.ready;
  }

  async put(reg: StoredRegistration): Promise<void> {
    await this.ensureNodes();
    const path = `${this.dir}/${reg.jobId}`;
    const data = this.seal.sealBytes(RECORD_KIND.registration, path, JSON.stringify(reg));
    try {
      await this.session.setData(path, data);
    } catch (err) {
      if (zkCode(err) !== NO_NODE) throw err;
      try {
        await this.session.create(path, data);
      } catch (e) {
        if (zkCode(e) !== NODE_EXISTS) throw e;
        await this.session.setData(path, data);
      }
    }
    this.stored(reg);
    // A node this replica wrote is watched too: another replica may change or remove it.
    if (!this.watched.has(reg.jobId)) await this.readOne(reg.jobId);
  }

  async remove(jobId: string, attempt?: string): Promise<void> {
    const path = `${this.dir}/${jobId}`;
    if (attempt === undefined) {
      await this.session.remove(path);
      this.dropped(jobId);
      return;
    }
    // Compare and delete: a retry on another replica may have replaced the record meanwhile.
    const node = await this.session.getData(path);
    if (!node) return;
    // Only a record this attempt can prove is its own is removed: a forged one is left alone.
    if (this.open(jobId, node.data)?.attempt !== attempt) return;
    try {
      await this.session.remove(path, node.version);
      this.dropped(jobId);
    } catch (err) {
      if (zkCode(err) !== BAD_VERSION) throw err;
    }
  }

  /**
   * Re-reads the list (re-arming its watch) and reads the nodes not watched yet; `full` reads every
   * node again (a new session, whose data watches are gone). A watched node is not re-read on a
   * list change: each read would add one more watcher of that node.
   */
  protected async readAll(full: boolean): Promise<void> {
    if (!this.session.isConnected) return;
    const onList = () =>
      void this.sync().catch((err: unknown) => this.log.warn({ err: (err as Error).message }, 'cannot read the shared job registrations'));
    const children = new Set((await this.session.getChildren(this.dir, onList)).filter((c) => JOB_ID.test(c)));
    this.keepOnly(children);
    if (full) this.watched.clear();
    for (const jobId of children) if (!this.watched.has(jobId)) await this.readOne(jobId);
  }

  /** Reads one node and watches it (one watch per node: `watched`). */
  private async readOne(jobId: string): Promise<void> {
    const onData = () => {
      this.watched.delete(jobId);
      void this.readOne(jobId).catch((err: unknown) => {
        // Unwatched now: the retry's sync reads it again.
        this.log.warn(
          { jobId, err: (err as Error).message, retryInMs: this.retryMs },
          'cannot read a shared job registration; reading it again shortly',
        );
        this.retryLater();
      });
    };
    const node = await this.session.getData(`${this.dir}/${jobId}`, onData);
    if (node) this.watched.add(jobId);
    if (!node) return this.gone(jobId);
    const rec = this.open(jobId, node.data);
    if (rec) this.found(rec);
  }

  /**
   * The registration a node holds, if it opens under the replicas' secret as a registration of
   * this very node and reads as one; else undefined, logged and counted — never acted on: a
   * registration names the principal whose tokens the job gets.
   */
  private open(jobId: string, data: Buffer): StoredRegistration | undefined {
    const path = `${this.dir}/${jobId}`;
    const opened = this.seal.openJson(RECORD_KIND.registration, path, data);
    let rec: StoredRegistration | undefined;
    if (opened.ok) {
      try {
        rec = parseStoredRegistration(opened.value);
      } catch {
        rec = undefined;
      }
    }
    if (rec && rec.jobId === jobId) return rec;
    const reason = opened.ok ? 'malformed' : opened.reason;
    this.log.error(
      { jobId, path, reason, store: this.where },
      'a shared job registration failed its integrity check (forged, altered, moved from another node, or written without gateway.ha.shared-secret); ignored',
    );
    this.onRejected?.(RECORD_KIND.registration, reason);
    return undefined;
  }
}

/**
 * Job-id claims shared by the replicas: one node per claimed id, created atomically, so a retry
 * on any replica is a retry and anyone else's run under a used id is a conflict (job-claims.ts's
 * rule), whichever replica each request reached. A claim older than the retention is replaced
 * (version-checked, so two replicas cannot both replace it).
 */
export class ZooKeeperJobClaims implements JobClaimBook {
  private readonly dir: string;
  private ready: Promise<void> | undefined;

  constructor(
    private readonly session: NodeSession & Pick<ZooKeeperSession, 'getData' | 'getChildren' | 'setData' | 'remove'>,
    private readonly opts: {
      retentionMs: number;
      wallClock?: () => number;
      /** Seals every claim written and opens every claim read (the replicas' shared secret). */
      seal: RecordSeal;
      log: Logger;
      onRejected?: RejectedRecord;
      /** Seal, on the first start-up step, the claims an older gateway left unsealed (adoptUnsealed). */
      adoptUnsealed?: boolean;
    },
  ) {
    this.dir = `${gatewayRoot(session.settings.namespace)}/claims`;
  }

  /**
   * Creates and closes the claims' nodes (adopting unsealed claims if asked). Called at start-up so
   * an open directory left by an older gateway is closed at once; a failed attempt (ZooKeeper not
   * reachable yet) is tried again by the next claim.
   */
  init(): Promise<void> {
    this.ready ??= (async () => {
      await ensureOwnNodes(this.session, [gatewayRoot(this.session.settings.namespace), this.dir], this.opts.log);
      if (this.opts.adoptUnsealed) await adoptUnsealed(this.session, this.dir, RECORD_KIND.claim, this.opts.seal, isClaimOf, this.opts.log);
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  async claim(jobId: string, principal: string, fingerprint: string): Promise<ClaimResult> {
    await this.init();
    const now = (this.opts.wallClock ?? Date.now)();
    const path = `${this.dir}/${jobId}`;
    const mine: Claim = { jobId, principal, fingerprint, at: now };
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.session.create(path, this.opts.seal.sealBytes(RECORD_KIND.claim, path, JSON.stringify(mine)));
        return 'new';
      } catch (err) {
        if (zkCode(err) !== NODE_EXISTS) throw err;
      }
      const node = await this.session.getData(path);
      if (!node) continue; // released meanwhile
      const existing = this.open(jobId, node.data);
      if (existing && existing.at >= now - this.opts.retentionMs) {
        return existing.principal === principal && existing.fingerprint === fingerprint ? 'retry' : 'conflict';
      }
      // Expired, or not a claim of the replicas (forged: it locks nothing): replace it, unless another replica changed it first.
      try {
        await this.session.remove(path, node.version);
      } catch (err) {
        if (zkCode(err) !== BAD_VERSION) throw err;
      }
    }
    return 'conflict';
  }

  async release(jobId: string): Promise<void> {
    await this.session.remove(`${this.dir}/${jobId}`);
  }

  /** Removes the claims older than the retention (the leader's gateway does, now and then); returns how many. */
  async prune(): Promise<number> {
    const cutoff = (this.opts.wallClock ?? Date.now)() - this.opts.retentionMs;
    let removed = 0;
    for (const jobId of await this.session.getChildren(this.dir)) {
      const node = await this.session.getData(`${this.dir}/${jobId}`);
      if (!node) continue;
      const at = this.open(jobId, node.data)?.at;
      if (at !== undefined && at >= cutoff) continue;
      try {
        await this.session.remove(`${this.dir}/${jobId}`, node.version);
        removed++;
      } catch (err) {
        if (zkCode(err) !== BAD_VERSION) throw err;
      }
    }
    return removed;
  }

  async flush(): Promise<void> {
    /* every write is awaited */
  }

  /** The claim a node holds, if it opens as a claim of this very node; else undefined, logged and counted. */
  private open(jobId: string, data: Buffer): Claim | undefined {
    const path = `${this.dir}/${jobId}`;
    const opened = this.opts.seal.openJson(RECORD_KIND.claim, path, data);
    if (opened.ok && isClaimOf(jobId, opened.value)) return opened.value;
    const reason = opened.ok ? 'malformed' : opened.reason;
    this.opts.log.error(
      { jobId, path, reason },
      'a shared job-id claim failed its integrity check (forged, altered, moved from another node, or written without gateway.ha.shared-secret); it binds nothing and is replaced',
    );
    this.opts.onRejected?.(RECORD_KIND.claim, reason);
    return undefined;
  }
}
