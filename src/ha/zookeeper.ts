import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import * as zk from 'node-zookeeper-client';
import type { Logger } from 'pino';
import { deriveKey, KEY_PURPOSE } from './record-seal';

/** The ZooKeeper settings of the cluster's Flink configuration (its `high-availability.zookeeper.*` keys). */
export interface ZooKeeperSettings {
  quorum: string;
  /** `<path.root>/<cluster-id>`, normalised as Flink does (ZooKeeperUtils): `/flink/default` by default. */
  namespace: string;
  sessionTimeoutMs: number;
  connectionTimeoutMs: number;
}

export type WatchEvent = 'changed';

/** The user name of the gateways' digest identity in ZooKeeper (the same on every replica). */
export const DIGEST_USER = 'flink-jar-gateway';

/** The gateways' ZooKeeper digest credentials: a user name and a password derived from the replicas' shared secret. */
export interface ZooKeeperDigest {
  user: string;
  password: string;
}

/** The digest credentials of the replicas sharing `secret` (HKDF-SHA-256, a purpose of its own: the password reveals nothing of the record key). */
export function digestFromSecret(secret: string | Buffer): ZooKeeperDigest {
  return { user: DIGEST_USER, password: deriveKey(secret, KEY_PURPOSE.zookeeperDigest).toString('base64url') };
}

/** ZooKeeper's id of a digest identity (DigestAuthenticationProvider): `user:base64(sha1(user:password))`. */
export function digestId(d: ZooKeeperDigest): string {
  return `${d.user}:${createHash('sha1').update(`${d.user}:${d.password}`).digest('base64')}`;
}

/** One entry of a node's ACL as the gateway reads and writes it. */
export interface AclEntry {
  /** ZooKeeper's permission bits: READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16 (ALL 31). */
  perms: number;
  scheme: string;
  id: string;
}

export const OPEN_ACL: readonly AclEntry[] = [{ perms: zk.Permission.ALL, scheme: 'world', id: 'anyone' }];

/**
 * The ACL of every node the gateway creates: everything for its digest identity, nothing for anyone
 * else — not even reading: the records name principals, artifact locations and job configurations,
 * and nothing but the gateways needs them. Without credentials (tests that play other processes),
 * the open ACL.
 */
export function ownAcl(digest: ZooKeeperDigest | undefined): readonly AclEntry[] {
  return digest ? [{ perms: zk.Permission.ALL, scheme: 'digest', id: digestId(digest) }] : OPEN_ACL;
}

export function sameAcl(a: readonly AclEntry[], b: readonly AclEntry[]): boolean {
  const key = (e: AclEntry) => `${e.perms}|${e.scheme}|${e.id}`;
  return a.length === b.length && a.map(key).sort().join('\n') === b.map(key).sort().join('\n');
}

function toZk(acl: readonly AclEntry[]): zk.ACL[] {
  return acl.map((e) => new zk.ACL(e.perms, new zk.Id(e.scheme, e.id)));
}

/** A ZooKeeper error code from node-zookeeper-client (NO_NODE, NODE_EXISTS, BAD_VERSION, ...), or undefined. */
export function zkCode(err: unknown): number | undefined {
  return err instanceof zk.Exception ? err.getCode() : undefined;
}
export const NO_NODE = zk.Exception.NO_NODE;
export const NODE_EXISTS = zk.Exception.NODE_EXISTS;
export const BAD_VERSION = zk.Exception.BAD_VERSION;
export const NO_AUTH = zk.Exception.NO_AUTH;

export interface ZooKeeperSessionOptions {
  /** Digest credentials sent on every connection; nodes this session creates are then closed to everyone else (ownAcl). */
  digest?: ZooKeeperDigest;
}

/**
 * One ZooKeeper session with promises, that outlives session expiry: an expired session is
 * replaced by a new client, and every listener hears `up` again (to re-read and re-arm its
 * watches, which die with the session). `down` means the session is disconnected or expired:
 * what was read may be stale, and a leader must act as if it were not one (as Flink's
 * JobManager does when its ZooKeeper connection is suspended).
 */
export class ZooKeeperSession extends EventEmitter<{ up: []; down: [] }> {
  private client: zk.Client;
  private closed = false;
  private connected = false;
  private readonly digest: ZooKeeperDigest | undefined;
  /** The ACL of the nodes this session creates. */
  readonly acl: readonly AclEntry[];

  constructor(
    readonly settings: ZooKeeperSettings,
    private readonly log: Logger,
    opts: ZooKeeperSessionOptions = {},
  ) {
    super();
    this.digest = opts.digest;
    this.acl = ownAcl(opts.digest);
    this.client = this.newClient();
  }

  /** The digest identity this session authenticates as (its ACL id, no secret), for logs and the status route. */
  get identity(): string | undefined {
    return this.digest ? `digest:${digestId(this.digest)}` : undefined;
  }

  get isConnected(): boolean {
    return this.connected;
  }

  private newClient(): zk.Client {
    // retries: 0 — the client's `retries` re-send a failed operation (with backoff up to the session
    // timeout), not the connection, which it re-establishes by itself. An operation the gateway has
    // given up on (and answered 503 for) must not be carried out minutes later: a claim or a
    // registration written after its run was refused.
    const client = zk.createClient(this.settings.quorum, { sessionTimeout: this.settings.sessionTimeoutMs, spinDelay: 250, retries: 0 });
    // Before connect: the client sends it right after the connect request, ahead of any operation,
    // and again on every reconnection of the session (a replaced client after expiry gets it here).
    // Digest authentication never fails at the server; a wrong password only yields another identity.
    if (this.digest) client.addAuthInfo('digest', Buffer.from(`${this.digest.user}:${this.digest.password}`, 'utf8'));
    client.on('state', (state) => {
      if (client !== this.client || this.closed) return;
      if (state === zk.State.SYNC_CONNECTED) {
        if (!this.connected) {
          this.connected = true;
          this.log.info({ quorum: this.settings.quorum }, 'ZooKeeper session connected');
          this.emit('up');
        }
      } else if (state === zk.State.DISCONNECTED || state === zk.State.EXPIRED) {
        if (this.connected) {
          this.connected = false;
          this.log.warn({ state: state.name }, 'ZooKeeper session lost');
          this.emit('down');
        }
        if (state === zk.State.EXPIRED) {
          client.close();
          this.client = this.newClient();
          this.client.connect();
        }
      }
    });
    return client;
  }

  /** Connects; resolves once connected, rejects after the connection timeout (the client keeps trying). */
  async start(): Promise<void> {
    this.client.connect();
    if (this.connected) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off('up', onUp);
        reject(new Error(`cannot connect to ZooKeeper at ${this.settings.quorum} within ${this.settings.connectionTimeoutMs} ms`));
      }, this.settings.connectionTimeoutMs);
      const onUp = () => {
        clearTimeout(timer);
        resolve();
      };
      this.once('up', onUp);
    });
  }

  close(): void {
    this.closed = true;
    this.connected = false;
    this.client.close();
  }

  /** The node's data and version, or undefined when it does not exist; `watch` fires once on its next change. */
  getData(path: string, watch?: () => void): Promise<{ data: Buffer; version: number } | undefined> {
    return this.timed(
      'getData',
      path,
      () =>
        new Promise((resolve, reject) => {
          const cb = (err: Error | zk.Exception | null, data: Buffer, stat: zk.Stat) => {
            if (zkCode(err) === NO_NODE) resolve(undefined);
            else if (err) reject(err);
            else resolve({ data: data ?? Buffer.alloc(0), version: stat.version });
          };
          if (watch) this.client.getData(path, () => watch(), cb);
          else this.client.getData(path, cb);
        }),
    );
  }

  /** Fires `watch` once when the node is created, deleted or changed; resolves whether it exists now. */
  exists(path: string, watch: () => void): Promise<boolean> {
    return this.timed(
      'exists',
      path,
      () =>
        new Promise((resolve, reject) =>
          this.client.exists(
            path,
            () => watch(),
            (err, stat) => (err ? reject(err) : resolve(stat !== null && stat !== undefined)),
          ),
        ),
    );
  }

  /** Children names, or [] when the node does not exist; `watch` fires once on the next change of the list. */
  getChildren(path: string, watch?: () => void): Promise<string[]> {
    return this.timed(
      'getChildren',
      path,
      () =>
        new Promise((resolve, reject) => {
          const cb = (err: Error | zk.Exception | null, children: string[]) => {
            if (zkCode(err) === NO_NODE) resolve([]);
            else if (err) reject(err);
            else resolve(children);
          };
          if (watch) this.client.getChildren(path, () => watch(), cb);
          else this.client.getChildren(path, cb);
        }),
    );
  }

  /** Creates a persistent node with this session's ACL (or `acl`); rejects with NODE_EXISTS (zkCode) when it exists. */
  create(path: string, data: Buffer, acl: readonly AclEntry[] = this.acl): Promise<void> {
    return this.timed(
      'create',
      path,
      () =>
        new Promise((resolve, reject) =>
          this.client.create(path, data, toZk(acl), zk.CreateMode.PERSISTENT, (err) => (err ? reject(err) : resolve())),
        ),
    );
  }

  /** The node's ACL and ACL version (`aversion`), or undefined when it does not exist. */
  getACL(path: string): Promise<{ acl: AclEntry[]; aversion: number } | undefined> {
    return this.timed(
      'getACL',
      path,
      () =>
        new Promise((resolve, reject) =>
          this.client.getACL(path, (err, acls, stat) => {
            if (zkCode(err) === NO_NODE) resolve(undefined);
            else if (err) reject(err);
            // The client's ACL objects carry `permission`, not the `perms` its typings declare.
            else
              resolve({
                acl: (acls ?? []).map((a) => ({
                  perms: (a as unknown as { permission?: number }).permission ?? a.perms,
                  scheme: a.id.scheme,
                  id: a.id.id,
                })),
                aversion: stat.aversion,
              });
          }),
        ),
    );
  }

  /** Replaces the node's ACL if its ACL version is `aversion` (-1: any); needs ADMIN on the node. */
  setACL(path: string, acl: readonly AclEntry[], aversion = -1): Promise<void> {
    return this.timed(
      'setACL',
      path,
      () => new Promise((resolve, reject) => this.client.setACL(path, toZk(acl), aversion, (err) => (err ? reject(err) : resolve()))),
    );
  }

  /** Sets the node's data if its version is `version` (-1: any); rejects with BAD_VERSION or NO_NODE. */
  setData(path: string, data: Buffer, version = -1): Promise<number> {
    return this.timed(
      'setData',
      path,
      () =>
        new Promise((resolve, reject) =>
          this.client.setData(path, data, version, (err, stat) => (err ? reject(err) : resolve(stat.version))),
        ),
    );
  }

  /** Removes the node if its version is `version` (-1: any); an absent node is not an error. */
  remove(path: string, version = -1): Promise<void> {
    return this.timed(
      'remove',
      path,
      () =>
        new Promise((resolve, reject) =>
          this.client.remove(path, version, (err) => (err && zkCode(err) !== NO_NODE ? reject(err) : resolve())),
        ),
    );
  }

  /**
   * A call that does not complete within the connection timeout fails (the client would queue it
   * until the session is back): the caller answers 503 instead of hanging.
   */
  private timed<T>(what: string, path: string, start: () => Promise<T>): Promise<T> {
    // Never queued while disconnected: the client would send it once the session is back, long
    // after the caller gave up on it.
    if (!this.connected) return Promise.reject(new Error(`ZooKeeper ${what} ${path}: not connected to ${this.settings.quorum}`));
    const op = start();
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `ZooKeeper ${what} ${path} did not complete within ${this.settings.connectionTimeoutMs} ms (${this.connected ? 'connected' : 'not connected'})`,
            ),
          ),
        this.settings.connectionTimeoutMs,
      );
    });
    return Promise.race([op, limit]).finally(() => clearTimeout(timer));
  }

  /**
   * Creates the missing nodes of `path` with `acl` (default this session's). The cluster's own
   * namespace (`<path.root>/<cluster-id>`) is Flink's and gets Flink's open ACL: a node the gateway
   * closed there first would lock Flink out of its own namespace.
   */
  mkdirp(path: string, acl: readonly AclEntry[] = this.acl): Promise<void> {
    return this.timed(
      'mkdirp',
      path,
      () => new Promise((resolve, reject) => this.client.mkdirp(path, toZk(acl), (err) => (err ? reject(err) : resolve()))),
    );
  }
}
