import { decodeLeaderRecord, identityFromConfig, isLeaderRecordOf, rpcEndpointOf } from '../../../src/ha/flink-leader';
import { haStoreOf } from '../../../src/ha/ha-options';
import { leaderRecordBytes } from '../../helpers/flink-ha-records';

// Leader records as Flink 2.1.3 wrote them into ZooKeeper on a two-JobManager cluster here (the
// same bytes on 1.20.5 and 2.3.0): dispatcher and rest_server of one leader, one session id.
const DISPATCHER =
  'aced00057739003770656b6b6f2e7463703a2f2f666c696e6b403132372e302e302e313a33343436312f757365722f7270632f646973706174636865725f317372000e6a6176612e7574696c2e55554944bc9903f7986d852f0200024a000c6c65617374536967426974734a000b6d6f73745369674269747378708a09f97250f80b37c2bbb296520f439f';
const REST =
  'aced000577180016687474703a2f2f3132372e302e302e313a34343931357372000e6a6176612e7574696c2e55554944bc9903f7986d852f0200024a000c6c65617374536967426974734a000b6d6f73745369674269747378708a09f97250f80b37c2bbb296520f439f';

describe("Flink's ZooKeeper leader records", () => {
  it('decodes the address and the leader session id Flink wrote', () => {
    const d = decodeLeaderRecord(Buffer.from(DISPATCHER, 'hex'));
    const r = decodeLeaderRecord(Buffer.from(REST, 'hex'));
    expect(d?.address).toBe('pekko.tcp://flink@127.0.0.1:34461/user/rpc/dispatcher_1');
    expect(r?.address).toBe('http://127.0.0.1:44915');
    expect(d?.sessionId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(r?.sessionId).toBe(d?.sessionId);
  });

  it('reads an empty node, truncated or foreign bytes as "no leader", never a guess', () => {
    for (const hex of [
      '',
      'aced0005',
      DISPATCHER.slice(0, 60),
      '7b7d',
      DISPATCHER.replace('6a6176612e7574696c2e55554944', '6a6176612e7574696c2e55554945'),
    ]) {
      expect(decodeLeaderRecord(Buffer.from(hex, 'hex'))).toBeUndefined();
    }
  });

  it("leads only when the record names this JobManager's RPC endpoint", () => {
    const rec = decodeLeaderRecord(Buffer.from(DISPATCHER, 'hex'))!;
    expect(rpcEndpointOf(rec.address)).toEqual({ host: '127.0.0.1', port: 34461 });
    expect(rpcEndpointOf('akka.tcp://flink@[::1]:6123/user/rpc/dispatcher_1')).toEqual({ host: '::1', port: 6123 });
    expect(isLeaderRecordOf(rec, { host: '127.0.0.1', port: 34461 })).toBe(true);
    expect(isLeaderRecordOf(rec, { host: '127.0.0.1', port: 34462 })).toBe(false);
    expect(isLeaderRecordOf(rec, { host: '10.0.0.7' })).toBe(false);
    expect(isLeaderRecordOf(undefined, { host: '127.0.0.1' })).toBe(false);
    // A pod's JobManager (its own pod IP, the HA port a range): the host decides.
    expect(
      identityFromConfig([
        { key: 'jobmanager.rpc.address', value: '10.0.0.7' },
        { key: 'high-availability.jobmanager.port', value: '50010-50020' },
      ]),
    ).toEqual({ host: '10.0.0.7' });
    expect(
      identityFromConfig([
        { key: 'jobmanager.rpc.address', value: '127.0.0.1' },
        { key: 'high-availability.jobmanager.port', value: '34461' },
      ]),
    ).toEqual({ host: '127.0.0.1', port: 34461 });
    expect(identityFromConfig([])).toBeUndefined();
  });
});

describe('gateway.ha.store', () => {
  const zkHa = {
    'high-availability.type': 'zookeeper',
    'high-availability.zookeeper.quorum': 'zk-0:2181,zk-1:2181',
    'high-availability.cluster-id': '/team-a/',
  };

  it("follows the cluster's Flink configuration, with Flink's defaults and path normalisation", () => {
    expect(haStoreOf('auto', {})).toEqual({ kind: 'local' });
    expect(haStoreOf('auto', zkHa)).toEqual({
      kind: 'zookeeper',
      settings: { quorum: 'zk-0:2181,zk-1:2181', namespace: '/flink/team-a', sessionTimeoutMs: 60_000, connectionTimeoutMs: 15_000 },
    });
    expect(
      haStoreOf('auto', {
        ...zkHa,
        'high-availability.zookeeper.path.root': 'flink//ha/',
        'high-availability.zookeeper.client.session-timeout': '4000',
      }),
    ).toMatchObject({ settings: { namespace: '/flink/ha/team-a', sessionTimeoutMs: 4000 } });
    // Flink 1.x's legacy key.
    expect(
      haStoreOf('auto', { high: 'x', 'high-availability': 'ZOOKEEPER', 'high-availability.zookeeper.quorum': 'zk:2181' }),
    ).toMatchObject({ kind: 'zookeeper' });
    expect(haStoreOf('local', zkHa)).toEqual({ kind: 'local' });
  });

  it('refuses what it cannot serve, saying what to do', () => {
    expect(() => haStoreOf('auto', { 'high-availability.type': 'kubernetes' })).toThrow(/Kubernetes HA without kubernetes.cluster-id/);
    expect(() => haStoreOf('zookeeper', {})).toThrow(/sets high-availability.type: none/);
    expect(() => haStoreOf('auto', { 'high-availability.type': 'zookeeper' })).toThrow(/without high-availability.zookeeper.quorum/);
  });
});

describe('the test helper that plays Flink', () => {
  it('writes records the decoder reads as Flink wrote them', () => {
    const real = Buffer.from(DISPATCHER, 'hex');
    const session = Buffer.concat([real.subarray(real.length - 8), real.subarray(real.length - 16, real.length - 8)]);
    expect(leaderRecordBytes('pekko.tcp://flink@127.0.0.1:34461/user/rpc/dispatcher_1', session).toString('hex')).toBe(DISPATCHER);
  });
});
