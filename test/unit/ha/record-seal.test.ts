import { createHmac, hkdfSync } from 'node:crypto';
import { deriveKey, KEY_PURPOSE, RecordSeal, SEAL_VERSION } from '../../../src/ha/record-seal';

const SECRET = 'a-shared-secret-of-the-replicas';
const WHERE = '/flink/default/flink-jar-gateway/registrations/0123456789abcdef0123456789abcdef';
const OTHER = '/flink/default/flink-jar-gateway/registrations/fedcba9876543210fedcba9876543210';
const BODY = JSON.stringify({ jobId: '0123456789abcdef0123456789abcdef', principal: 'team-a' });

describe('RecordSeal', () => {
  const seal = new RecordSeal(SECRET);

  it('opens what it sealed, giving back the exact body text', () => {
    const sealed = seal.seal('registration', WHERE, BODY);
    expect(seal.open('registration', WHERE, sealed)).toEqual({ ok: true, body: BODY });
    expect(seal.open('registration', WHERE, Buffer.from(sealed))).toEqual({ ok: true, body: BODY });
    expect(seal.openJson('registration', WHERE, seal.sealBytes('registration', WHERE, BODY))).toEqual({
      ok: true,
      value: JSON.parse(BODY),
    });
    // Readable in zkCli/kubectl, and without the secret in it.
    expect(JSON.parse(sealed)).toMatchObject({ seal: SEAL_VERSION, kind: 'registration', body: BODY });
    expect(sealed).not.toContain(SECRET);
  });

  it('refuses a record moved to another place (another job id)', () => {
    const sealed = seal.seal('registration', WHERE, BODY);
    expect(seal.open('registration', OTHER, sealed)).toEqual({ ok: false, reason: 'bad-mac' });
  });

  it('refuses a record passed off as another kind, even with the kind field rewritten', () => {
    const sealed = seal.seal('claim', WHERE, BODY);
    expect(seal.open('registration', WHERE, sealed)).toEqual({ ok: false, reason: 'wrong-kind' });
    const relabelled = JSON.stringify({ ...JSON.parse(sealed), kind: 'registration' });
    expect(seal.open('registration', WHERE, relabelled)).toEqual({ ok: false, reason: 'bad-mac' });
  });

  it('refuses an altered body, a record sealed under another secret, and a forged MAC', () => {
    const sealed = JSON.parse(seal.seal('registration', WHERE, BODY)) as Record<string, string>;
    expect(seal.open('registration', WHERE, JSON.stringify({ ...sealed, body: BODY.replace('team-a', 'team-b') }))).toEqual({
      ok: false,
      reason: 'bad-mac',
    });
    expect(new RecordSeal('another-secret-entirely-xyz').open('registration', WHERE, JSON.stringify(sealed))).toEqual({
      ok: false,
      reason: 'bad-mac',
    });
    for (const mac of ['', 'AAAA', Buffer.alloc(32).toString('base64url'), `${sealed.mac}A`, '!!not base64!!']) {
      expect(seal.open('registration', WHERE, JSON.stringify({ ...sealed, mac }))).toEqual({ ok: false, reason: 'bad-mac' });
    }
  });

  it('refuses unsealed records: plain JSON as an older gateway wrote it, non-JSON, wrong shapes, unknown versions', () => {
    for (const data of [
      BODY,
      'not json',
      '',
      'null',
      '[]',
      '"x"',
      JSON.stringify({ seal: SEAL_VERSION, kind: 'registration', mac: 'x', body: { a: 1 } }),
    ]) {
      expect(seal.open('registration', WHERE, data)).toEqual({ ok: false, reason: 'unsealed' });
    }
    const v2 = JSON.stringify({ ...JSON.parse(seal.seal('registration', WHERE, BODY)), seal: 'hmac-sha256.v2' });
    expect(seal.open('registration', WHERE, v2)).toEqual({ ok: false, reason: 'unknown-version' });
  });

  it('reports a body that is not JSON as malformed in openJson', () => {
    expect(seal.openJson('registration', WHERE, seal.seal('registration', WHERE, '{oops'))).toEqual({ ok: false, reason: 'malformed' });
  });

  it('opens records of a previous secret during a rotation, and seals only with the current one', () => {
    const old = new RecordSeal('the-old-secret-of-the-replicas');
    const rotating = new RecordSeal(SECRET, ['the-old-secret-of-the-replicas']);
    const oldSealed = old.seal('claim', WHERE, BODY);
    expect(rotating.open('claim', WHERE, oldSealed)).toEqual({ ok: true, body: BODY });
    expect(seal.open('claim', WHERE, rotating.seal('claim', WHERE, BODY))).toEqual({ ok: true, body: BODY });
    expect(old.open('claim', WHERE, rotating.seal('claim', WHERE, BODY))).toEqual({ ok: false, reason: 'bad-mac' });
  });

  it('binds each field unambiguously (no two kind/place splits give one MAC)', () => {
    const a = JSON.parse(seal.seal('ab', 'c', BODY)) as { mac: string };
    const b = JSON.parse(seal.seal('a', 'bc', BODY)) as { mac: string };
    expect(a.mac).not.toBe(b.mac);
  });

  it('derives independent keys per purpose with HKDF-SHA-256, and the MAC is HMAC-SHA-256 under the record key', () => {
    const macKey = deriveKey(SECRET, KEY_PURPOSE.recordMac);
    expect(macKey.equals(Buffer.from(hkdfSync('sha256', Buffer.from(SECRET), Buffer.alloc(0), KEY_PURPOSE.recordMac, 32)))).toBe(true);
    expect(macKey.equals(deriveKey(SECRET, KEY_PURPOSE.zookeeperDigest))).toBe(false);
    // An independent computation of the documented construction, so another implementation (the Kubernetes store, a tool) can check records.
    const h = createHmac('sha256', macKey);
    for (const part of [SEAL_VERSION, 'registration', WHERE, BODY]) {
      const b = Buffer.from(part);
      const len = Buffer.alloc(4);
      len.writeUInt32BE(b.length);
      h.update(len).update(b);
    }
    expect((JSON.parse(seal.seal('registration', WHERE, BODY)) as { mac: string }).mac).toBe(h.digest('base64url'));
  });
});
