import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { childEnvironment } from '../../src/cluster/embedded-cluster';
import { freePort, launch, signalGroup } from '../../src/cluster/process-group';

export interface ZooKeeperServerOptions {
  /** A Flink distribution directory: its `bin/zookeeper.sh` and the ZooKeeper shaded into flink-dist. */
  home: string;
  log: Logger;
  startupTimeoutMs?: number;
  java?: string;
}

/**
 * A single ZooKeeper server on loopback, started with Flink's own `bin/zookeeper.sh
 * start-foreground` (FlinkZooKeeperQuorumPeer, the ZooKeeper shaded into flink-dist) as users of
 * Flink's ZooKeeper HA can: for the HA tests and an HA `npm start`. Its data, configuration and
 * log live in a private directory removed on stop; it runs in its own process group, stopped by
 * group id. A 500 ms tick lets sessions time out in seconds (Flink's session timeout is then what
 * the cluster's configuration says, not ZooKeeper's 4 s minimum).
 */
export class ZooKeeperServer {
  private stopped = false;
  private readonly onExit = () => signalGroup(this.child, 'SIGKILL');

  private constructor(
    /** `127.0.0.1:<port>`: the value of `high-availability.zookeeper.quorum`. */
    readonly connectString: string,
    readonly dir: string,
    private readonly child: ChildProcess,
    private readonly exited: Promise<void>,
    private readonly log: Logger,
  ) {
    process.once('exit', this.onExit);
  }

  static async start(opts: ZooKeeperServerOptions): Promise<ZooKeeperServer> {
    const log = opts.log.child({ component: 'zookeeper' });
    const dir = mkdtempSync(join(tmpdir(), 'flink-jar-gateway-zookeeper-'));
    for (const sub of ['conf', 'log', 'pid', 'data']) mkdirSync(join(dir, sub), { recursive: true, mode: 0o700 });
    for (const f of readdirSync(join(opts.home, 'conf'))) {
      if (/^log4j.*\.properties$/.test(f)) writeFileSync(join(dir, 'conf', f), readFileSync(join(opts.home, 'conf', f)));
    }
    const port = await freePort();
    const zooCfg = [
      'tickTime=500',
      'initLimit=10',
      'syncLimit=5',
      `dataDir=${join(dir, 'data')}`,
      `clientPort=${port}`,
      'clientPortAddress=127.0.0.1',
      // The AdminServer would bind 0.0.0.0:8080.
      'admin.enableServer=false',
      'maxClientCnxns=0',
    ];
    writeFileSync(join(dir, 'conf', 'zoo.cfg'), `${zooCfg.join('\n')}\n`, { mode: 0o600 });
    // zookeeper.sh reads config.yaml (through config.sh) for its heap: a small one.
    writeFileSync(join(dir, 'conf', 'config.yaml'), 'zookeeper.heap.mb: 128\n', { mode: 0o600 });
    const env = {
      ...childEnvironment(),
      FLINK_HOME: opts.home,
      FLINK_CONF_DIR: join(dir, 'conf'),
      FLINK_LOG_DIR: join(dir, 'log'),
      FLINK_PID_DIR: join(dir, 'pid'),
      ...(opts.java ? { JAVA_RUN: opts.java } : {}),
    };
    const member = launch('zookeeper', join(opts.home, 'bin', 'zookeeper.sh'), ['1'], dir, env);
    const server = new ZooKeeperServer(`127.0.0.1:${port}`, dir, member.child, member.exited, log);
    try {
      await server.waitReady(port, opts.startupTimeoutMs ?? 60_000);
    } catch (err) {
      await server.stop();
      throw err;
    }
    log.info({ connectString: server.connectString }, 'ZooKeeper ready');
    return server;
  }

  /** Ready once it answers the `srvr` command (allowed by default) with its mode. */
  private async waitReady(port: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let gone = false;
    void this.exited.then(() => (gone = true));
    while (Date.now() < deadline) {
      if (gone) throw new Error(`ZooKeeper exited during start-up: ${this.logTail()}`);
      if (/Mode: standalone/.test(await fourLetterWord(port, 'srvr').catch(() => ''))) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`ZooKeeper was not ready within ${timeoutMs} ms: ${this.logTail()}`);
  }

  logTail(lines = 15): string {
    try {
      return readFileSync(join(this.dir, 'log', 'zookeeper.console'), 'utf8')
        .trim()
        .split('\n')
        .slice(-lines)
        .join('\n');
    } catch {
      return '(no output)';
    }
  }

  async stop(graceMs = 10_000): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    signalGroup(this.child, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(this.child, 'SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
    signalGroup(this.child, 'SIGKILL');
    process.removeListener('exit', this.onExit);
    rmSync(this.dir, { recursive: true, force: true });
    this.log.info('ZooKeeper stopped');
  }
}

function fourLetterWord(port: number, word: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let text = '';
    socket.setTimeout(2000, () => socket.destroy(new Error('timeout')));
    socket.once('connect', () => socket.write(word));
    socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
    socket.once('end', () => resolve(text));
    socket.once('error', reject);
  });
}
