import { FlinkLeaderFollower, type LeaderState, leaderPath } from '../../../src/ha/flink-leader';
import { FakeZooKeeper } from '../../helpers/fake-zookeeper';
import { leaderRecordBytes } from '../../helpers/flink-ha-records';
import { flush, ManualClock } from '../../helpers/manual-clock';
import { captureLogger } from '../../helpers/token-fakes';

const NAMESPACE = '/flink/follow-unit';
const RECORD = leaderPath({ namespace: NAMESPACE }, 'dispatcher');
const SELF = { host: '127.0.0.1', port: 6123 };
const OWN = 'pekko.tcp://flink@127.0.0.1:6123/user/rpc/dispatcher_1';
const OTHER = 'pekko.tcp://flink@127.0.0.1:6124/user/rpc/dispatcher_1';

function follow(zk: FakeZooKeeper) {
  const clock = new ManualClock();
  const { log, messages } = captureLogger();
  const follower = new FlinkLeaderFollower(zk, SELF, log, { clock, retryMs: 1000 });
  const changes: LeaderState[] = [];
  follower.on('change', (s) => changes.push(s));
  return { follower, changes, messages, clock };
}

/**
 * Flink's leader record is an ephemeral node of the leader's session (ZooKeeperUtils
 * .writeLeaderInformationToZooKeeper creates it EPHEMERAL): a killed leader's record disappears
 * when its session expires, and the next leader creates it anew, once.
 */
describe("following Flink's leader record across a failover (a fake ZooKeeper, an injected clock)", () => {
  it("a record created between the read that found none and the watch for one is read: the new leader's gateway leads", async () => {
    const zk = new FakeZooKeeper(NAMESPACE);
    zk.write(RECORD, leaderRecordBytes(OTHER));
    const { follower, changes } = follow(zk);
    await follower.start();
    expect(follower.current).toMatchObject({ leading: false, record: { address: OTHER } });

    // The leader dies. This gateway's JobManager creates its record after the gateway's getData
    // found none and before its exists call arrives (a loaded machine widens that gap; the HA
    // failover test lost every job's tokens for a whole failover this way).
    zk.afterNext('getData', () => zk.write(RECORD, leaderRecordBytes(OWN)));
    zk.delete(RECORD);
    await flush();

    expect(follower.current).toMatchObject({ leading: true, record: { address: OWN } });
    expect(changes.at(-1)).toMatchObject({ leading: true });
    // It still follows the record: the next failover is seen too.
    expect(zk.watchesOn(RECORD)).toBeGreaterThan(0);
    zk.delete(RECORD);
    await flush();
    expect(follower.current.leading).toBe(false);
    zk.write(RECORD, leaderRecordBytes(OTHER));
    await flush();
    expect(follower.current).toMatchObject({ leading: false, record: { address: OTHER } });
  });

  it('with no record, waits for one and leads once its own JobManager writes it', async () => {
    const zk = new FakeZooKeeper(NAMESPACE);
    const { follower, changes } = follow(zk);
    await follower.start();
    expect(follower.current.leading).toBe(false);
    zk.write(RECORD, leaderRecordBytes(OWN));
    await flush();
    expect(follower.current).toMatchObject({ leading: true, record: { address: OWN } });
    expect(changes.map((c) => c.leading)).toEqual([true]);
  });

  it('a read that fails (and so set no watch) is retried: a record written meanwhile is not missed', async () => {
    const zk = new FakeZooKeeper(NAMESPACE);
    zk.write(RECORD, leaderRecordBytes(OTHER));
    const { follower, messages, clock } = follow(zk);
    await follower.start();

    // The leader dies; the read its deletion triggers fails (a ZooKeeper call timed out under
    // load), so no watch is left; then this gateway's JobManager writes its record.
    zk.failNext('getData', new Error('ZooKeeper getData did not complete within 3000 ms (connected)'));
    zk.delete(RECORD);
    await flush();
    expect(zk.watchesOn(RECORD)).toBe(0);
    zk.write(RECORD, leaderRecordBytes(OWN));
    expect(follower.current.record?.address).toBe(OTHER);
    expect(messages('warn')).toContain('cannot read the Flink leader record; reading it again shortly');

    await clock.advance(1000);
    expect(follower.current).toMatchObject({ leading: true, record: { address: OWN } });
    expect(zk.watchesOn(RECORD)).toBeGreaterThan(0);
  });

  it('a failed first read is retried, and start() does not reject', async () => {
    const zk = new FakeZooKeeper(NAMESPACE);
    zk.write(RECORD, leaderRecordBytes(OWN));
    zk.failNext('getData', new Error('ZooKeeper getData: not connected'));
    const { follower, clock } = follow(zk);
    await expect(follower.start()).resolves.toBeUndefined();
    expect(follower.current.leading).toBe(false);
    await clock.advance(1000);
    expect(follower.current.leading).toBe(true);
  });

  it('stop() cancels a pending retry', async () => {
    const zk = new FakeZooKeeper(NAMESPACE);
    zk.write(RECORD, leaderRecordBytes(OWN));
    zk.failNext('getData', new Error('timed out'));
    const { follower, clock, changes } = follow(zk);
    await follower.start();
    expect(clock.pending()).toEqual([1000]);
    follower.stop();
    expect(clock.pending()).toEqual([]);
    await clock.advance(5000);
    expect(changes).toEqual([]);
  });
});
