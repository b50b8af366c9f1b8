import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { haStoreOf, haTypeOf, KUBERNETES_HA_FACTORY } from '../../../src/ha/ha-options';
import { fromKubeconfig, resolveConnection } from '../../../src/ha/kubernetes-connection';
import { leaderRecordOf } from '../../../src/ha/kubernetes-leader';
import { gatewayConfigMapName } from '../../../src/ha/kubernetes-store';

const k8sHa = { 'high-availability.type': 'kubernetes', 'kubernetes.cluster-id': 'session-a', 'high-availability.storageDir': 's3://ha/' };

describe("gateway.ha.store against the cluster's high-availability.type, in every spelling Flink accepts", () => {
  it.each([
    ['kubernetes', 'kubernetes'],
    ['KUBERNETES', 'kubernetes'],
    [KUBERNETES_HA_FACTORY, 'kubernetes'],
    ['zookeeper', 'zookeeper'],
    ['ZooKeeper', 'zookeeper'],
    ['NONE', 'none'],
    ['none', 'none'],
    ['com.example.MyHaServicesFactory', 'unknown'],
  ])('%s is %s', (value, engine) => {
    expect(haTypeOf({ 'high-availability.type': value }).engine).toBe(engine);
  });

  it('auto on Kubernetes HA: the cluster id and namespace of its ConfigMaps, its kubeconfig and its leader-election timings', () => {
    expect(haStoreOf('auto', k8sHa)).toEqual({
      kind: 'kubernetes',
      settings: { clusterId: 'session-a', namespace: 'default', leaseDurationMs: 15_000, renewDeadlineMs: 15_000, retryPeriodMs: 5_000 },
    });
    expect(
      haStoreOf('kubernetes', {
        ...k8sHa,
        'high-availability.type': KUBERNETES_HA_FACTORY,
        'kubernetes.namespace': 'team-a',
        'kubernetes.config.file': '/etc/kube/config',
        'kubernetes.context': 'prod',
        'high-availability.kubernetes.leader-election.lease-duration': '6 s',
        'high-availability.kubernetes.leader-election.renew-deadline': '4000',
        'high-availability.kubernetes.leader-election.retry-period': '1 s',
      }),
    ).toEqual({
      kind: 'kubernetes',
      settings: {
        clusterId: 'session-a',
        namespace: 'team-a',
        configFile: '/etc/kube/config',
        context: 'prod',
        leaseDurationMs: 6000,
        renewDeadlineMs: 4000,
        retryPeriodMs: 1000,
      },
    });
  });

  it('a factory class the gateway does not know is refused, never silently "no HA"; a mismatch with the explicit engine too', () => {
    expect(() => haStoreOf('auto', { 'high-availability.type': 'com.example.MyHaServicesFactory' })).toThrow(
      /factory class the gateway does not know/,
    );
    expect(haStoreOf('local', { 'high-availability.type': 'com.example.MyHaServicesFactory' })).toEqual({ kind: 'local' });
    expect(() =>
      haStoreOf('kubernetes', { 'high-availability.type': 'zookeeper', 'high-availability.zookeeper.quorum': 'zk:2181' }),
    ).toThrow(/gateway.ha.store is kubernetes/);
    expect(() => haStoreOf('zookeeper', k8sHa)).toThrow(/gateway.ha.store is zookeeper/);
    expect(() => haStoreOf('kubernetes', {})).toThrow(/gateway.ha.store is kubernetes/);
    expect(() => haStoreOf('auto', { 'high-availability.type': 'kubernetes' })).toThrow(/without kubernetes.cluster-id/);
  });
});

describe("Flink's Kubernetes leader records and the gateway's ConfigMap names", () => {
  it('reads <sessionId>,<address> of a component; anything else is no leader', () => {
    const data = {
      'org.apache.flink.k8s.leader.dispatcher':
        '5c0b7e4e-8a51-4e0e-a3d5-0d6f1b2c3d4e,pekko.tcp://flink@10.0.0.7:6123/user/rpc/dispatcher_1',
    };
    expect(leaderRecordOf({ metadata: { name: 'x' }, data })).toEqual({
      sessionId: '5c0b7e4e-8a51-4e0e-a3d5-0d6f1b2c3d4e',
      address: 'pekko.tcp://flink@10.0.0.7:6123/user/rpc/dispatcher_1',
    });
    expect(leaderRecordOf({ metadata: { name: 'x' }, data: { 'org.apache.flink.k8s.leader.dispatcher': 'no-comma' } })).toBeUndefined();
    expect(
      leaderRecordOf({ metadata: { name: 'x' }, data: { 'org.apache.flink.k8s.leader.dispatcher': 'not-a-uuid,pekko.tcp://flink@h:1/x' } }),
    ).toBeUndefined();
    expect(leaderRecordOf({ metadata: { name: 'x' } })).toBeUndefined();
    expect(leaderRecordOf(undefined)).toBeUndefined();
  });

  it("names the operator never takes for Flink's HA metadata", () => {
    for (const kind of ['registration', 'claim'] as const) {
      const name = gatewayConfigMapName('session-a', kind, '0123456789abcdef0123456789abcdef');
      expect(name).not.toMatch(/-config-map$|-jobmanager-leader$/);
      expect(name.length).toBeLessThanOrEqual(253);
      expect(name).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    }
  });
});

describe('where the API server is and who the gateway is there', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-kubeconfig-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("a kubeconfig's context: server, CA data, token; relative files resolve next to the kubeconfig", () => {
    writeFileSync(join(dir, 'ca.pem'), 'CA-PEM');
    writeFileSync(join(dir, 'token'), 'file-token');
    const file = join(dir, 'config');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'current-context: a',
        'clusters:',
        `- {name: ca, cluster: {server: "https://10.0.0.1:6443/", certificate-authority-data: ${Buffer.from('CA-DATA').toString('base64')}}}`,
        '- {name: cb, cluster: {server: "https://10.0.0.2:6443", certificate-authority: ca.pem}}',
        'users:',
        '- {name: ua, user: {token: abc}}',
        '- {name: ub, user: {tokenFile: token}}',
        '- {name: uc, user: {exec: {command: aws}}}',
        'contexts:',
        '- {name: a, context: {cluster: ca, user: ua}}',
        '- {name: b, context: {cluster: cb, user: ub}}',
        '- {name: c, context: {cluster: cb, user: uc}}',
      ].join('\n'),
    );
    expect(fromKubeconfig(file)).toEqual({
      server: 'https://10.0.0.1:6443',
      ca: 'CA-DATA',
      token: 'abc',
      source: `kubeconfig ${file} context "a"`,
    });
    expect(fromKubeconfig(file, 'b')).toMatchObject({ server: 'https://10.0.0.2:6443', ca: 'CA-PEM', tokenFile: join(dir, 'token') });
    expect(() => fromKubeconfig(file, 'c')).toThrow(/exec or auth-provider plugin/);
    expect(() => fromKubeconfig(file, 'zz')).toThrow(/no context "zz"/);
  });

  it("in a pod: the service account's token file and CA, the service's address", () => {
    writeFileSync(join(dir, 'token'), 'sa-token');
    writeFileSync(join(dir, 'ca.crt'), 'SA-CA');
    expect(
      resolveConnection({
        env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443', HOME: dir },
        serviceAccountDir: dir,
      }),
    ).toEqual({ server: 'https://10.96.0.1:443', tokenFile: join(dir, 'token'), ca: 'SA-CA', source: "the pod's service account" });
    expect(() => resolveConnection({ env: {}, serviceAccountDir: join(dir, 'none') })).toThrow(/no Kubernetes API server to reach/);
  });
});
