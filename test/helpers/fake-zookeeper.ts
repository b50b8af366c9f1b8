import { EventEmitter } from 'node:events';
import * as zk from 'node-zookeeper-client';
import { type AclEntry, OPEN_ACL, type ZooKeeperSettings } from '../../src/ha/zookeeper';

type Op = 'getData' | 'exists' | 'getChildren';

/**
 * An in-memory ZooKeeper session with ZooKeeper's watch rules, for unit tests of what follows
 * ZooKeeper (the leader follower, the shared registration store, the HA coordinator):
 * - getData on a missing node answers "none" and sets no watch; exists sets one either way (on an
 *   existing node it fires only on that node's next change or deletion); getChildren watches the list;
 * - every watch fires once; the test writes nodes as other processes would (`write`, `delete`);
 * - `failNext` makes the next call of one kind fail without setting its watch (a call that timed
 *   out under load), `afterNext` runs a step after a call was answered and before its caller sees
 *   the answer (another process writing between two calls of one gateway).
 *
 * A fake, because those interleavings cannot be ordered on a real server.
 */
export class FakeZooKeeper extends EventEmitter<{ up: []; down: [] }> {
  readonly settings: ZooKeeperSettings;
  isConnected = true;
  /** ACLs are not enforced here: the real server's tests (test/ha/) hold them. */
  readonly acl: readonly AclEntry[] = OPEN_ACL;
  private readonly nodes = new Map<string, { data: Buffer; version: number }>();
  private dataWatches = new Map<string, (() => void)[]>();
  private childWatches = new Map<string, (() => void)[]>();
  private readonly failures = new Map<Op, Error>();
  private readonly after = new Map<Op, () => void>();

  constructor(namespace: string) {
    super();
    this.settings = { quorum: 'zk-fake:2181', namespace, sessionTimeoutMs: 4000, connectionTimeoutMs: 3000 };
  }

  failNext(op: Op, err: Error): void {
    this.failures.set(op, err);
  }

  afterNext(op: Op, step: () => void): void {
    this.after.set(op, step);
  }

  /** Watches armed on `path` (data and existence watches). */
  watchesOn(path: string): number {
    return this.dataWatches.get(path)?.length ?? 0;
  }

  // ---- What the code under test calls ------------------------------------------------------

  async start(): Promise<void> {}

  close(): void {
    this.isConnected = false;
  }

  async getData(path: string, watch?: () => void): Promise<{ data: Buffer; version: number } | undefined> {
    this.mayFail('getData');
    const node = this.nodes.get(path);
    if (node && watch) this.arm(this.dataWatches, path, watch);
    const answer = node ? { data: node.data, version: node.version } : undefined;
    this.answered('getData');
    return answer;
  }

  async exists(path: string, watch: () => void): Promise<boolean> {
    this.mayFail('exists');
    this.arm(this.dataWatches, path, watch);
    const answer = this.nodes.has(path);
    this.answered('exists');
    return answer;
  }

  async getChildren(path: string, watch?: () => void): Promise<string[]> {
    this.mayFail('getChildren');
    if (watch) this.arm(this.childWatches, path, watch);
    const answer = this.childrenOf(path);
    this.answered('getChildren');
    return answer;
  }

  async mkdirp(_path: string, _acl?: readonly AclEntry[]): Promise<void> {}

  async getACL(path: string): Promise<{ acl: AclEntry[]; aversion: number } | undefined> {
    return this.nodes.has(path) ? { acl: [...this.acl], aversion: 0 } : undefined;
  }

  async setACL(_path: string, _acl: readonly AclEntry[], _aversion = -1): Promise<void> {}

  async create(path: string, data: Buffer, _acl?: readonly AclEntry[]): Promise<void> {
    if (this.nodes.has(path)) throw zkError(zk.Exception.NODE_EXISTS, 'NODE_EXISTS', path);
    this.write(path, data);
  }

  async setData(path: string, data: Buffer, version = -1): Promise<number> {
    const node = this.nodes.get(path);
    if (!node) throw zkError(zk.Exception.NO_NODE, 'NO_NODE', path);
    if (version !== -1 && version !== node.version) throw zkError(zk.Exception.BAD_VERSION, 'BAD_VERSION', path);
    this.write(path, data);
    return node.version + 1;
  }

  async remove(path: string, _version = -1): Promise<void> {
    this.delete(path);
  }

  // ---- What the test does as other processes ------------------------------------------------

  /** Creates or changes a node, firing its watches (and its parent's list watches on a create). */
  write(path: string, data: Buffer): void {
    const before = this.nodes.get(path);
    this.nodes.set(path, { data, version: before ? before.version + 1 : 0 });
    this.fire(this.dataWatches, path);
    if (!before) this.fire(this.childWatches, parentOf(path));
  }

  /** Removes a node (an ephemeral one when its owner's session expires), firing its watches. */
  delete(path: string): void {
    if (!this.nodes.delete(path)) return;
    this.fire(this.dataWatches, path);
    this.fire(this.childWatches, parentOf(path));
  }

  private childrenOf(path: string): string[] {
    const prefix = `${path}/`;
    return [...this.nodes.keys()]
      .filter((p) => p.startsWith(prefix) && !p.slice(prefix.length).includes('/'))
      .map((p) => p.slice(prefix.length));
  }

  private mayFail(op: Op): void {
    const err = this.failures.get(op);
    if (!err) return;
    this.failures.delete(op);
    throw err;
  }

  private answered(op: Op): void {
    const step = this.after.get(op);
    this.after.delete(op);
    step?.();
  }

  private arm(watches: Map<string, (() => void)[]>, path: string, watch: () => void): void {
    watches.set(path, [...(watches.get(path) ?? []), watch]);
  }

  private fire(watches: Map<string, (() => void)[]>, path: string): void {
    const fired = watches.get(path) ?? [];
    watches.delete(path);
    for (const w of fired) w();
  }
}

/** An error as node-zookeeper-client reports one (the gateway reads its code with `zkCode`). */
function zkError(code: number, name: string, path: string): zk.Exception {
  return new zk.Exception(code, name, path, zkError);
}

function parentOf(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}
