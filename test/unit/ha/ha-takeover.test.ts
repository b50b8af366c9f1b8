import { HaCoordinator } from '../../../src/ha/ha-coordinator';
import { FlinkLeaderFollower, leaderPath } from '../../../src/ha/flink-leader';
import { RecordSeal } from '../../../src/ha/record-seal';
import { RECORD_KIND } from '../../../src/ha/shared-store';
import { gatewayRoot, ZooKeeperRegistrationStore } from '../../../src/ha/zookeeper-store';
import type { StoredRegistration } from '../../../src/submission/registration-store';
import { FakeZooKeeper } from '../../helpers/fake-zookeeper';
import { leaderRecordBytes } from '../../helpers/flink-ha-records';
import { flush, ManualClock } from '../../helpers/manual-clock';
import { captureLogger } from '../../helpers/token-fakes';

const NAMESPACE = '/flink/takeover-unit';
const RECORD = leaderPath({ namespace: NAMESPACE }, 'dispatcher');
const DIR = `${gatewayRoot(NAMESPACE)}/registrations`;
const OWN = 'pekko.tcp://flink@127.0.0.1:6123/user/rpc/dispatcher_1';
const OTHER = 'pekko.tcp://flink@127.0.0.1:6124/user/rpc/dispatcher_1';
const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';
const seal = new RecordSeal('the-replicas-shared-secret');

/** Another replica stores a registration. */
function storeJob(zk: FakeZooKeeper, jobId: string): void {
  const rec: StoredRegistration = {
    jobId,
    principal: 'anonymous',
    configuration: {},
    provenance: {},
    registeredAt: new Date(0).toISOString(),
  };
  zk.write(`${DIR}/${jobId}`, seal.sealBytes(RECORD_KIND.registration, `${DIR}/${jobId}`, JSON.stringify(rec)));
}

describe('the shared registration store re-reads after a failed read (a fake ZooKeeper, an injected clock)', () => {
  it('a list read that fails (and so set no watch) is retried: registrations stored meanwhile are not missed', async () => {
    const zk = new FakeZooKeeper(NAMESPACE);
    const clock = new ManualClock();
    const { log, messages } = captureLogger();
    const store = new ZooKeeperRegistrationStore(zk, log, { seal, clock, retryMs: 1000 });
    await store.init();
    const added: string[] = [];
    store.on('added', (rec) => added.push(rec.jobId));

    // Another replica stores J1; this replica's read of the list fails (a timed-out call), so
    // its list is no longer watched and J2, stored next, would tell it nothing.
    zk.failNext('getChildren', new Error('ZooKeeper getChildren did not complete within 3000 ms (connected)'));
    storeJob(zk, J1);
    await flush();
    storeJob(zk, J2);
    await flush();
    expect(added).toEqual([]);
    expect(messages('warn')).toContain('cannot read the shared job registrations');

    await clock.advance(1000);
    expect(added.sort()).toEqual([J1, J2]);
    expect(
      store
        .list()
        .map((r) => r.jobId)
        .sort(),
    ).toEqual([J1, J2]);
    expect(clock.pending()).toEqual([]);
  });
});

/** The gateway's collaborators as the coordinator sees them: records of what it asked of each. */
function collaborators() {
  const calls: string[] = [];
  return {
    calls,
    registrations: {
      restore: async () => void calls.push('restore'),
      sharedStored: async (rec: StoredRegistration) => void calls.push(`stored ${rec.jobId}`),
      sharedRemoved: async (jobId: string) => void calls.push(`removed ${jobId}`),
      deactivate: () => void calls.push('deactivate'),
      list: () => [],
    },
    tokens: { start: async () => void calls.push('tokens.start'), stop: async () => void calls.push('tokens.stop') },
    watcher: { start: () => void calls.push('watcher.start'), stop: async () => void calls.push('watcher.stop') },
    cluster: {
      json: async () => ({
        status: 200,
        body: [
          { key: 'jobmanager.rpc.address', value: '127.0.0.1' },
          { key: 'high-availability.jobmanager.port', value: '6123' },
        ],
      }),
    },
  };
}

describe("taking over as the leading JobManager's gateway (a fake ZooKeeper, an injected clock)", () => {
  it('a failed re-read of the store does not stop the takeover half-way: jobs are registered, tokens obtained, and what the re-read missed arrives', async () => {
    const zk = new FakeZooKeeper(NAMESPACE);
    const clock = new ManualClock();
    const { log, messages } = captureLogger();
    const store = new ZooKeeperRegistrationStore(zk, log, { seal, clock, retryMs: 1000 });
    zk.write(RECORD, leaderRecordBytes(OTHER));
    storeJob(zk, J1);
    const c = collaborators();
    const coordinator = new HaCoordinator({
      session: zk,
      follow: (self, l) => new FlinkLeaderFollower(zk, self, l),
      store,
      registrations: c.registrations,
      tokens: c.tokens,
      watcher: c.watcher,
      cluster: c.cluster,
      readStates: async () => new Map(),
      log,
    });
    await coordinator.start();
    await flush();
    expect(coordinator.isLeading()).toBe(false);
    expect(store.list().map((r) => r.jobId)).toEqual([J1]);

    // Under load, ZooKeeper calls time out: the read of the list that J2's arrival triggers fails
    // (so the list is no longer watched), and so does the re-read on taking over, when the leader
    // dies and this gateway's JobManager takes over.
    const timedOut = new Error('ZooKeeper getChildren did not complete within 3000 ms (connected)');
    zk.failNext('getChildren', timedOut);
    storeJob(zk, J2);
    await flush();
    zk.delete(RECORD);
    await flush();
    zk.failNext('getChildren', timedOut);
    zk.write(RECORD, leaderRecordBytes(OWN));
    await flush();

    expect(coordinator.isLeading()).toBe(true);
    expect(c.calls).toEqual(['restore', 'tokens.start', 'watcher.start']);
    expect(messages('warn')).toContain(
      'cannot re-read the shared job registrations on taking over; registering the ones this replica has followed, the others once the store reads them',
    );

    await clock.advance(1000);
    expect(c.calls).toEqual(['restore', 'tokens.start', 'watcher.start', `stored ${J2}`]);
    await coordinator.stop();
  });
});
