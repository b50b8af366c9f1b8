import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ZooKeeperServer } from '../servers/zookeeper-server';
import { RecordSeal } from '../../src/ha/record-seal';
import {
  type AclEntry,
  DIGEST_USER,
  digestFromSecret,
  digestId,
  NO_AUTH,
  OPEN_ACL,
  ZooKeeperSession,
  zkCode,
} from '../../src/ha/zookeeper';
import { RECORD_KIND } from '../../src/ha/shared-store';
import { gatewayRoot, ZooKeeperJobClaims, ZooKeeperRegistrationStore } from '../../src/ha/zookeeper-store';
import type { StoredRegistration } from '../../src/submission/registration-store';
import { distributionHome } from '../helpers/flink-dist';
import { eventually } from '../helpers/eventually';
import { composeGateway } from '../helpers/gateway';
import { captureLogger } from '../helpers/token-fakes';

const log = pino({ level: 'warn' });
const SECRET = 'the-replicas-shared-secret-for-this-test';
const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';
const J3 = '33333333333333333333333333333333';
const DAY = 24 * 3600 * 1000;

const registration = (jobId: string, principal = 'team-a'): StoredRegistration => ({
  jobId,
  principal,
  configuration: {},
  provenance: {},
  registeredAt: new Date(0).toISOString(),
  submitted: true,
});

/** The code of a rejected ZooKeeper call (NO_AUTH, ...), or 'ok'. */
async function outcome(call: Promise<unknown>): Promise<number | 'ok'> {
  try {
    await call;
    return 'ok';
  } catch (err) {
    const code = zkCode(err);
    if (code === undefined) throw err;
    return code;
  }
}

/**
 * The gateway's subtree in a real ZooKeeper (Flink's bin/zookeeper.sh): closed to everyone but the
 * gateways' digest identity, and every record in it opened under the replicas' secret before it
 * is acted on — a forged record, even one written with the gateways' own identity, is ignored.
 */
describe("the gateways' ZooKeeper subtree is authenticated (digest ACLs, sealed records)", () => {
  let zk: ZooKeeperServer;
  const sessions: ZooKeeperSession[] = [];
  const namespace = `/flink/gw-acl-${randomBytes(4).toString('hex')}`;
  const settings = () => ({ quorum: zk.connectString, namespace, sessionTimeoutMs: 4000, connectionTimeoutMs: 5000 });
  const regDir = `${gatewayRoot(namespace)}/registrations`;
  const claimDir = `${gatewayRoot(namespace)}/claims`;
  const seal = new RecordSeal(SECRET);
  const ownAcl: AclEntry[] = [{ perms: 31, scheme: 'digest', id: digestId(digestFromSecret(SECRET)) }];
  let gateway: ZooKeeperSession;
  /** A process that reaches ZooKeeper without the secret. */
  let anyone: ZooKeeperSession;
  /** Someone holding the gateways' digest credentials but not the record key (or a gateway with a wrong secret). */
  let insider: ZooKeeperSession;

  async function open(opts: ConstructorParameters<typeof ZooKeeperSession>[2] = {}, ns = namespace): Promise<ZooKeeperSession> {
    const s = new ZooKeeperSession({ ...settings(), namespace: ns }, log, opts);
    sessions.push(s);
    await s.start();
    return s;
  }

  beforeAll(async () => {
    zk = await ZooKeeperServer.start({ home: distributionHome('2.1.3'), log });
    gateway = await open({ digest: digestFromSecret(SECRET) });
    anyone = await open();
    insider = await open({ digest: digestFromSecret(SECRET) });
  }, 120_000);

  afterAll(async () => {
    for (const s of sessions) s.close();
    await zk?.stop();
  });

  it("nodes the gateway creates carry an ACL that admits its digest identity only; the cluster's namespace stays open for Flink", async () => {
    const rejected: string[] = [];
    // Silent: it keeps following the subtree while the next tests plant records in it.
    const store = new ZooKeeperRegistrationStore(gateway, pino({ level: 'silent' }), {
      seal,
      onRejected: (kind, reason) => rejected.push(`${kind}:${reason}`),
    });
    await store.init();
    await store.put(registration(J1));
    const claims = new ZooKeeperJobClaims(gateway, { retentionMs: DAY, seal, log });
    expect(await claims.claim(J1, 'team-a', 'f1')).toBe('new');

    for (const path of [gatewayRoot(namespace), regDir, claimDir, `${regDir}/${J1}`, `${claimDir}/${J1}`]) {
      expect({ path, acl: (await gateway.getACL(path))?.acl }).toEqual({ path, acl: ownAcl });
    }
    expect(ownAcl[0]!.id).toMatch(new RegExp(`^${DIGEST_USER}:[A-Za-z0-9+/]{27}=$`));
    // Flink creates its own nodes under the namespace (leader/, jobs/, ...): it must stay open to it.
    expect((await gateway.getACL(namespace))?.acl).toEqual(OPEN_ACL);
    expect((await gateway.getACL('/flink'))?.acl).toEqual(OPEN_ACL);
    // Sealed on the wire, bound to its node.
    const node = await gateway.getData(`${regDir}/${J1}`);
    expect(seal.openJson(RECORD_KIND.registration, `${regDir}/${J1}`, node!.data)).toMatchObject({
      ok: true,
      value: { jobId: J1, principal: 'team-a' },
    });
    expect(rejected).toEqual([]);
  }, 30_000);

  it('a session without the secret can neither plant, change, remove nor read anything in the subtree', async () => {
    const planted = Buffer.from(JSON.stringify(registration(J2, 'admin')));
    expect(await outcome(anyone.create(`${regDir}/${J2}`, planted, OPEN_ACL))).toBe(NO_AUTH);
    expect(await outcome(anyone.create(`${claimDir}/${J2}`, planted, OPEN_ACL))).toBe(NO_AUTH);
    expect(await outcome(anyone.setData(`${regDir}/${J1}`, planted))).toBe(NO_AUTH);
    expect(await outcome(anyone.remove(`${regDir}/${J1}`))).toBe(NO_AUTH);
    expect(await outcome(anyone.remove(`${claimDir}/${J1}`))).toBe(NO_AUTH);
    expect(await outcome(anyone.setACL(`${regDir}/${J1}`, OPEN_ACL))).toBe(NO_AUTH);
    expect(await outcome(anyone.setACL(gatewayRoot(namespace), OPEN_ACL))).toBe(NO_AUTH);
    expect(await outcome(anyone.getData(`${regDir}/${J1}`))).toBe(NO_AUTH);
    expect(await outcome(anyone.getChildren(regDir))).toBe(NO_AUTH);
    // Nor can a session with another secret (digest authentication "succeeds" as another identity).
    const stranger = await open({ digest: digestFromSecret('another-secret-of-another-cluster') });
    expect(await outcome(stranger.create(`${regDir}/${J2}`, planted))).toBe(NO_AUTH);
    expect(await outcome(stranger.setData(`${regDir}/${J1}`, planted))).toBe(NO_AUTH);
    expect((await gateway.getChildren(regDir)).sort()).toEqual([J1]);
    expect(seal.open(RECORD_KIND.registration, `${regDir}/${J1}`, (await gateway.getData(`${regDir}/${J1}`))!.data).ok).toBe(true);
  }, 30_000);

  it("a forged registration — unsealed, sealed under another secret, or a valid one moved to another job's node — is ignored, logged and counted", async () => {
    const { log: storeLog, lines } = captureLogger();
    const rejected: string[] = [];
    const store = new ZooKeeperRegistrationStore(gateway, storeLog, {
      seal,
      onRejected: (kind, reason) => rejected.push(`${kind}:${reason}`),
    });
    const added: string[] = [];
    store.on('added', (rec) => added.push(rec.jobId));
    store.on('updated', (rec) => added.push(`updated ${rec.jobId}`));
    await store.init();
    expect(added).toEqual([J1]);

    // Written with the gateways' own identity (it passes the ACL), as an older gateway wrote records: plain JSON.
    await insider.create(`${regDir}/${J2}`, Buffer.from(JSON.stringify(registration(J2, 'admin'))));
    // Sealed, for its node, under another secret.
    await insider.create(
      `${regDir}/${J3}`,
      new RecordSeal('another-secret-of-another-cluster').sealBytes(
        RECORD_KIND.registration,
        `${regDir}/${J3}`,
        JSON.stringify(registration(J3, 'admin')),
      ),
    );
    await eventually(() => rejected.length >= 2, 'the store to read both planted records');
    // A valid record of J1 copied onto J1's own node with its body swapped (the principal), and
    // J1's valid record copied onto another job's node.
    const valid = (await insider.getData(`${regDir}/${J1}`))!.data;
    const wire = JSON.parse(valid.toString('utf8')) as { body: string };
    await insider.setData(`${regDir}/${J1}`, Buffer.from(JSON.stringify({ ...wire, body: wire.body.replace('team-a', 'admin') })));
    const J4 = '44444444444444444444444444444444';
    await insider.create(`${regDir}/${J4}`, valid);
    await eventually(() => rejected.length >= 4, 'the store to read the altered and the moved record');

    expect(rejected.sort()).toEqual(['registration:bad-mac', 'registration:bad-mac', 'registration:bad-mac', 'registration:unsealed']);
    expect(added).toEqual([J1]);
    expect(store.list().map((r) => ({ jobId: r.jobId, principal: r.principal }))).toEqual([{ jobId: J1, principal: 'team-a' }]);
    const errors = lines.filter((l) => l.level === 50);
    expect(errors.map((l) => l.jobId).sort()).toEqual([J1, J2, J3, J4]);
    expect(errors.every((l) => String(l.msg).startsWith('a shared job registration failed its integrity check'))).toBe(true);
    // No secret, key or MAC in what was logged.
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(JSON.stringify(lines)).not.toContain(JSON.parse(valid.toString('utf8')).mac);
    // A forged record is not removed on a rolled-back attempt's behalf either.
    await store.remove(J2, 'an-attempt');
    expect(await gateway.getData(`${regDir}/${J2}`)).toBeDefined();
    await insider.setData(`${regDir}/${J1}`, valid);
    for (const j of [J2, J3, J4]) await insider.remove(`${regDir}/${j}`);
  }, 30_000);

  it("a forged claim binds no job id: another principal's run claims it anew, and pruning removes it", async () => {
    const { log: claimLog, messages } = captureLogger();
    const rejected: string[] = [];
    const claims = new ZooKeeperJobClaims(gateway, {
      retentionMs: DAY,
      seal,
      log: claimLog,
      onRejected: (kind, reason) => rejected.push(`${kind}:${reason}`),
    });
    // A claim that would lock J2 for "attacker", fresh, written with the gateways' identity but without the record key.
    await insider.create(
      `${claimDir}/${J2}`,
      Buffer.from(JSON.stringify({ jobId: J2, principal: 'attacker', fingerprint: 'x', at: Date.now() })),
    );
    expect(await claims.claim(J2, 'team-a', 'f2')).toBe('new');
    expect(await claims.claim(J2, 'team-a', 'f2')).toBe('retry');
    expect(await claims.claim(J2, 'team-b', 'f2')).toBe('conflict');
    // A valid claim of J1 moved onto J3's node binds nothing there either.
    await insider.create(`${claimDir}/${J3}`, (await insider.getData(`${claimDir}/${J1}`))!.data);
    expect(await claims.claim(J3, 'team-b', 'f3')).toBe('new');
    // A forged claim is pruned like an expired one.
    const J5 = '55555555555555555555555555555555';
    await insider.create(
      `${claimDir}/${J5}`,
      Buffer.from(JSON.stringify({ jobId: J5, principal: 'attacker', fingerprint: 'x', at: Date.now() })),
    );
    expect(await claims.prune()).toBe(1);
    expect((await gateway.getChildren(claimDir)).sort()).toEqual([J1, J2, J3]);
    expect(rejected).toEqual(['job-claim:unsealed', 'job-claim:bad-mac', 'job-claim:unsealed']);
    expect(messages('error')).toHaveLength(3);
  }, 30_000);

  it('a subtree left open by a gateway without a secret is closed at start; one owned by someone else stops start-up with what to do', async () => {
    const ns2 = `${namespace}-legacy`;
    const legacy = await open({}, ns2);
    await legacy.mkdirp(`${gatewayRoot(ns2)}/registrations`);
    const s2 = await open({ digest: digestFromSecret(SECRET) }, ns2);
    const { log: l2, messages } = captureLogger();
    await new ZooKeeperRegistrationStore(s2, l2, { seal }).init();
    for (const path of [gatewayRoot(ns2), `${gatewayRoot(ns2)}/registrations`]) expect((await s2.getACL(path))?.acl).toEqual(ownAcl);
    expect(messages('warn')).toContain(
      "a node of the gateway's ZooKeeper subtree was open to others; it is now closed to everyone but the gateways",
    );

    // Squatted: someone created the gateway's root first, closed to an identity of their own.
    const ns3 = `${namespace}-squatted`;
    const squatter = await open({ digest: digestFromSecret('the-squatters-own-secret-value') });
    await squatter.mkdirp(ns3, OPEN_ACL);
    await squatter.create(gatewayRoot(ns3), Buffer.alloc(0));
    const s3 = await open({ digest: digestFromSecret(SECRET) }, ns3);
    const refused = new ZooKeeperRegistrationStore(s3, log, { seal }).init();
    await expect(refused).rejects.toMatchObject({ code: 'GW_CONFIG_INVALID', problems: [{ key: 'gateway.ha.shared-secret' }] });
    await expect(refused).rejects.toThrow(
      /flink-jar-gateway exists with an ACL that does not admit this gateway .*another gateway.ha.shared-secret.*deleteall/,
    );
    // A whole gateway on that cluster does not start (exit 2), rather than answer every run 503.
    const dir = mkdtempSync(join(tmpdir(), 'gw-acl-squatted-'));
    try {
      writeFileSync(
        join(dir, 'config.yaml'),
        `high-availability.type: zookeeper\nhigh-availability.zookeeper.quorum: "${zk.connectString}"\nhigh-availability.cluster-id: ${ns3.slice('/flink/'.length)}\nhigh-availability.zookeeper.client.connection-timeout: 5000\n`,
      );
      const gw = composeGateway('http://127.0.0.1:9', {
        'gateway.cluster.flink-conf': join(dir, 'config.yaml'),
        'gateway.tokens.store-dir': join(dir, 'store'),
        'security.delegation.tokens.enabled': 'false',
        'gateway.ha.shared-secret': SECRET,
      });
      await expect(gw).rejects.toMatchObject({
        code: 'GW_CONFIG_INVALID',
        problems: [{ key: 'gateway.ha.shared-secret', source: `ZooKeeper node ${gatewayRoot(ns3)}` }],
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);

  it('upgrading from gateways without a secret: with gateway.ha.adopt-unsealed-records, the records they left are sealed and closed once at start; later ones never', async () => {
    const ns = `${namespace}-upgrade`;
    const dirOf = (what: string) => `${gatewayRoot(ns)}/${what}`;
    const legacy = await open({}, ns);
    await legacy.mkdirp(dirOf('registrations'));
    await legacy.mkdirp(dirOf('claims'));
    await legacy.create(`${dirOf('registrations')}/${J1}`, Buffer.from(JSON.stringify(registration(J1))));
    await legacy.create(
      `${dirOf('claims')}/${J1}`,
      Buffer.from(JSON.stringify({ jobId: J1, principal: 'team-a', fingerprint: 'f1', at: Date.now() })),
    );
    // Not a record of its node: not adopted.
    await legacy.create(`${dirOf('registrations')}/${J2}`, Buffer.from(JSON.stringify(registration(J3))));

    const s = await open({ digest: digestFromSecret(SECRET) }, ns);
    const { log: l, messages } = captureLogger();
    const store = new ZooKeeperRegistrationStore(s, l, { seal, adoptUnsealed: true });
    await store.init();
    const claims = new ZooKeeperJobClaims(s, { retentionMs: DAY, seal, log: l, adoptUnsealed: true });
    await claims.init();
    expect(store.list().map((r) => r.jobId)).toEqual([J1]);
    expect(await claims.claim(J1, 'team-b', 'f1')).toBe('conflict');
    expect(await claims.claim(J1, 'team-a', 'f1')).toBe('retry');
    for (const path of [`${dirOf('registrations')}/${J1}`, `${dirOf('claims')}/${J1}`, dirOf('registrations'), dirOf('claims')])
      expect({ path, acl: (await s.getACL(path))?.acl }).toEqual({ path, acl: ownAcl });
    expect(messages('warn').filter((m) => m.startsWith('gateway.ha.adopt-unsealed-records'))).toHaveLength(2);
    // After that start, an unsealed record is ignored even with the option on.
    const rejected: string[] = [];
    const later = new ZooKeeperRegistrationStore(s, l, { seal, onRejected: (kind, reason) => rejected.push(`${kind}:${reason}`) });
    await later.init();
    await s.create(`${dirOf('registrations')}/${J3}`, Buffer.from(JSON.stringify(registration(J3))));
    await eventually(() => rejected.includes('registration:unsealed'), 'the later unsealed record to be rejected');
    expect(
      later
        .list()
        .map((r) => r.jobId)
        .sort(),
    ).toEqual([J1]);
  }, 30_000);
});
