import { EventEmitter } from 'node:events';
import * as zk from 'node-zookeeper-client';
import type { Logger } from 'pino';

/** The ZooKeeper settings of the cluster's Flink configuration (its `high-availability.zookeeper.*` keys). */
export interface ZooKeeperSettings {
  quorum: string;
  /** `<path.root>/<cluster-id>`, normalised as Flink does (ZooKeeperUtils): `/flink/default` by default. */
  namespace: string;
  sessionTimeoutMs: number;
  connectionTimeoutMs: number;
}

export type WatchEvent = 'changed';

/** A ZooKeeper error code from node-zookeeper-client (NO_NODE, NODE_EXISTS, BAD_VERSION, ...), or undefined. */
export function zkCode(err: unknown): number | undefined {
  return err instanceof zk.Exception ? err.getCode() : undefined;
}
export const NO_NODE = zk.Exception.NO_NODE;
export const NODE_EXISTS = zk.Exception.NODE_EXISTS;
export const BAD_VERSION = zk.Exception.BAD_VERSION;

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

  constructor(
    readonly settings: ZooKeeperSettings,
    private readonly log: Logger,
  ) {
    super();
    this.client = this.newClient();
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
    return this.timed('getData', path, () => new Promise((resolve, reject) => {
      const cb = (err: Error | zk.Exception | null, data: Buffer, stat: zk.Stat) => {
        if (zkCode(err) === NO_NODE) resolve(undefined);
        else if (err) reject(err);
        else resolve({ data: data ?? Buffer.alloc(0), version: stat.version });
      };
      if (watch) this.client.getData(path, () => watch(), cb);
      else this.client.getData(path, cb);
    }));
  }

  /** Fires `watch` once when the node is created, deleted or changed; resolves whether it exists now. */
  exists(path: string, watch: () => void): Promise<boolean> {
    return this.timed('exists', path, () => new Promise((resolve, reject) => this.client.exists(path, () => watch(), (err, stat) => (err ? reject(err) : resolve(stat !== null && stat !== undefined)))));
  }

  /** Children names, or [] when the node does not exist; `watch` fires once on the next change of the list. */
  getChildren(path: string, watch?: () => void): Promise<string[]> {
    return this.timed('getChildren', path, () => new Promise((resolve, reject) => {
      const cb = (err: Error | zk.Exception | null, children: string[]) => {
        if (zkCode(err) === NO_NODE) resolve([]);
        else if (err) reject(err);
        else resolve(children);
      };
      if (watch) this.client.getChildren(path, () => watch(), cb);
      else this.client.getChildren(path, cb);
    }));
  }

  /** Creates a persistent node; rejects with NODE_EXISTS (zkCode) when it exists. */
  create(path: string, data: Buffer): Promise<void> {
    return this.timed('create', path, () => new Promise((resolve, reject) => this.client.create(path, data, zk.CreateMode.PERSISTENT, (err) => (err ? reject(err) : resolve()))));
  }

  /** Sets the node's data if its version is `version` (-1: any); rejects with BAD_VERSION or NO_NODE. */
  setData(path: string, data: Buffer, version = -1): Promise<number> {
    return this.timed('setData', path, () => new Promise((resolve, reject) => this.client.setData(path, data, version, (err, stat) => (err ? reject(err) : resolve(stat.version)))));
  }

  /** Removes the node if its version is `version` (-1: any); an absent node is not an error. */
  remove(path: string, version = -1): Promise<void> {
    return this.timed('remove', path, () => new Promise((resolve, reject) => this.client.remove(path, version, (err) => (err && zkCode(err) !== NO_NODE ? reject(err) : resolve()))));
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
      timer = setTimeout(() => reject(new Error(`ZooKeeper ${what} ${path} did not complete within ${this.settings.connectionTimeoutMs} ms (${this.connected ? 'connected' : 'not connected'})`)), this.settings.connectionTimeoutMs);
    });
    return Promise.race([op, limit]).finally(() => clearTimeout(timer));
  }

  mkdirp(path: string): Promise<void> {
    return this.timed('mkdirp', path, () => new Promise((resolve, reject) => this.client.mkdirp(path, (err) => (err ? reject(err) : resolve()))));
  }
}
