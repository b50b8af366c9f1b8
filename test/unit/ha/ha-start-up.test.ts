import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConfigError } from '../../../src/config/registry';
import { haStoreOf } from '../../../src/ha/ha-options';
import { digestFromSecret, digestId } from '../../../src/ha/zookeeper';
import { composeGateway } from '../../helpers/gateway';

const SECRET = 'a-random-secret-the-replicas-share';
/** Nothing listens there: the gateway never reaches a JobManager or ZooKeeper in these tests. */
const NOWHERE = 'http://127.0.0.1:9';

/**
 * What a gateway whose cluster runs ZooKeeper HA refuses at start-up (GW_CONFIG_INVALID, exit 2),
 * each problem naming the key to change: an ACL mode it cannot honour, a shared store without the
 * replicas' secret, a secret that is too short or set twice.
 */
describe('start-up with ZooKeeper HA', () => {
  let dir: string;
  const flinkConf = (extra: Record<string, string> = {}) => {
    const file = join(dir, 'config.yaml');
    const conf = {
      'high-availability.type': 'zookeeper',
      'high-availability.zookeeper.quorum': '127.0.0.1:9',
      'high-availability.cluster-id': 'team-a',
      'high-availability.zookeeper.client.connection-timeout': '200',
      ...extra,
    };
    writeFileSync(
      file,
      Object.entries(conf)
        .map(([k, v]) => `${k}: "${v}"\n`)
        .join(''),
    );
    return file;
  };
  const start = (options: Record<string, string>) =>
    composeGateway(NOWHERE, { 'gateway.tokens.store-dir': join(dir, 'store'), 'security.delegation.tokens.enabled': 'false', ...options });
  const problemsOf = async (options: Record<string, string>) => {
    try {
      const gw = await start(options);
      await gw.close();
    } catch (err) {
      const e = err as ConfigError;
      return { code: e.code, problems: e.problems?.map((p) => ({ key: p.key, message: p.message })) };
    }
    return { code: 'started', problems: [] };
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-ha-start-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("refuses Flink's creator ACL mode, which needs SASL, naming the key and what to do", async () => {
    const r = await problemsOf({
      'gateway.cluster.flink-conf': flinkConf({ 'high-availability.zookeeper.client.acl': 'creator' }),
      'gateway.ha.shared-secret': SECRET,
    });
    expect(r.code).toBe('GW_CONFIG_INVALID');
    expect(r.problems).toEqual([
      {
        key: 'high-availability.zookeeper.client.acl',
        message: expect.stringMatching(
          /creator.*SASL.*leader records.*high-availability.zookeeper.client.acl: open.*gateway.ha.shared-secret.*gateway.ha.store: local/,
        ),
      },
    ]);
    // An unknown mode is refused too (Flink refuses it as well); open, any case, is served.
    expect(() =>
      haStoreOf('auto', {
        'high-availability.type': 'zookeeper',
        'high-availability.zookeeper.quorum': 'zk:2181',
        'high-availability.zookeeper.client.acl': 'world',
      }),
    ).toThrow(/client.acl: world/);
    expect(
      haStoreOf('auto', {
        'high-availability.type': 'zookeeper',
        'high-availability.zookeeper.quorum': 'zk:2181',
        'high-availability.zookeeper.client.acl': 'OPEN',
      }),
    ).toMatchObject({ kind: 'zookeeper' });
    // One gateway that keeps its state locally never talks to ZooKeeper: creator does not concern it.
    expect(
      haStoreOf('local', {
        'high-availability.type': 'zookeeper',
        'high-availability.zookeeper.quorum': 'zk:2181',
        'high-availability.zookeeper.client.acl': 'creator',
      }),
    ).toEqual({ kind: 'local' });
  });

  it("refuses a shared store without the replicas' secret, saying how to set one", async () => {
    const r = await problemsOf({ 'gateway.cluster.flink-conf': flinkConf() });
    expect(r).toEqual({
      code: 'GW_CONFIG_INVALID',
      problems: [
        {
          key: 'gateway.ha.shared-secret',
          message: expect.stringMatching(
            /ZooKeeper store, which anyone who reaches it could write: set the same random secret.*openssl rand.*gateway.secrets.dir.*gateway.ha.shared-secret-file/,
          ),
        },
      ],
    });
    // Without HA nothing is shared and no secret is needed.
    expect((await problemsOf({})).code).toBe('started');
  });

  it('refuses a short secret, and a secret set both as a value and as a file', async () => {
    expect(await problemsOf({ 'gateway.cluster.flink-conf': flinkConf(), 'gateway.ha.shared-secret': 'short' })).toEqual({
      code: 'GW_CONFIG_INVALID',
      problems: [{ key: 'gateway.ha.shared-secret', message: expect.stringContaining('fewer than 16 bytes') }],
    });
    writeFileSync(join(dir, 'secret'), `${SECRET}\n`);
    expect(
      await problemsOf({
        'gateway.cluster.flink-conf': flinkConf(),
        'gateway.ha.shared-secret': SECRET,
        'gateway.ha.shared-secret-file': join(dir, 'secret'),
      }),
    ).toMatchObject({ code: 'GW_CONFIG_INVALID', problems: [{ key: 'gateway.ha.shared-secret-file' }] });
    expect(
      await problemsOf({ 'gateway.cluster.flink-conf': flinkConf(), 'gateway.ha.shared-secret-file': join(dir, 'missing') }),
    ).toMatchObject({
      code: 'GW_CONFIG_INVALID',
      problems: [{ key: 'gateway.ha.shared-secret-file', message: expect.stringContaining('ENOENT') }],
    });
  });

  it('takes the secret from a file (gateway.ha.shared-secret-file, or gateway.secrets.dir as a Kubernetes Secret mounts it), and logs only its digest identity', async () => {
    writeFileSync(join(dir, 'secret'), `${SECRET}\n`);
    const secrets = join(dir, 'secrets');
    mkdirSync(secrets);
    writeFileSync(join(secrets, 'gateway.ha.shared-secret'), `${SECRET}\n`);
    for (const options of [{ 'gateway.ha.shared-secret-file': join(dir, 'secret') }, { 'gateway.secrets.dir': secrets }] as Record<
      string,
      string
    >[]) {
      const gw = await start({ 'gateway.cluster.flink-conf': flinkConf(), ...options });
      try {
        const line = gw.logs.find((l) => l.msg === "the gateway's ZooKeeper nodes admit this digest identity only");
        // The trailing newline of the file is not part of the secret: every replica derives the same identity.
        expect(line?.identity).toBe(`digest:${digestId(digestFromSecret(SECRET))}`);
        expect(JSON.stringify(gw.logs)).not.toContain(SECRET);
        expect(JSON.stringify(gw.logs)).not.toContain(digestFromSecret(SECRET).password);
      } finally {
        await gw.close();
      }
    }
  });
});
