import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * Integrity of the records the gateway replicas share (registrations, job-id claims, ...) in a
 * store anyone with access to the engine could write: ZooKeeper, Kubernetes ConfigMaps. Each
 * record is sealed with an HMAC-SHA-256 under a key derived from a secret the replicas share, and
 * the MAC binds the record to its kind and to where it is stored (a node path, a ConfigMap name
 * and data key), so a valid record cannot be planted under another job id or passed off as
 * another kind. A reader opens a record before acting on it; one that does not open is ignored.
 *
 * Engine-neutral: a store chooses the `kind` and `where` strings (stable across replicas and
 * versions: they are part of what is signed) and stores the sealed text as it is.
 *
 * Wire form (UTF-8 JSON, readable with zkCli or kubectl):
 * `{"seal":"hmac-sha256.v1","kind":"<kind>","mac":"<base64url>","body":"<the record's JSON text>"}`.
 * The MAC covers the exact body text, so no canonical JSON is needed.
 */

export const SEAL_VERSION = 'hmac-sha256.v1';

/** HKDF `info` of each key derived from the shared secret: one secret, independent keys per use. */
export const KEY_PURPOSE = {
  recordMac: 'flink-jar-gateway/ha/record-mac/v1',
  zookeeperDigest: 'flink-jar-gateway/ha/zookeeper-digest/v1',
} as const;

/** The shortest shared secret accepted (bytes): 128 bits of a random secret, as printed by `openssl rand -base64 24`. */
export const MIN_SECRET_BYTES = 16;

/**
 * A 32-byte key for one purpose, derived from the shared secret with HKDF-SHA-256 (RFC 5869):
 * keys of different purposes reveal nothing about each other or the secret.
 */
export function deriveKey(secret: string | Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret, Buffer.alloc(0), purpose, 32));
}

/** Why a record did not open: for the log and the metric, never containing the secret or a MAC. */
export type SealFailure =
  /** not JSON, or not the sealed wire form (e.g. written by an older gateway or by hand) */
  | 'unsealed'
  /** a seal version this gateway does not know */
  | 'unknown-version'
  /** sealed as another kind of record */
  | 'wrong-kind'
  /** the MAC does not match: forged, altered, moved from another place, or sealed under another secret */
  | 'bad-mac';

export type Opened = { ok: true; body: string } | { ok: false; reason: SealFailure };

interface Wire {
  seal: string;
  kind: string;
  mac: string;
  body: string;
}

/**
 * Seals and opens records under the replicas' shared secret. `previous` secrets still open records
 * (a rotation: every replica first gets the new secret with the old one as previous, then the old
 * one is dropped once every record was rewritten); only the current secret seals.
 */
export class RecordSeal {
  private readonly key: Buffer;
  private readonly keys: readonly Buffer[];

  constructor(secret: string | Buffer, previous: readonly (string | Buffer)[] = []) {
    this.key = deriveKey(secret, KEY_PURPOSE.recordMac);
    this.keys = [this.key, ...previous.map((s) => deriveKey(s, KEY_PURPOSE.recordMac))];
  }

  /** The sealed text of `body` (a record's JSON text) stored as `kind` at `where`. */
  seal(kind: string, where: string, body: string): string {
    const wire: Wire = { seal: SEAL_VERSION, kind, mac: mac(this.key, kind, where, body), body };
    return JSON.stringify(wire);
  }

  /** `seal` for a Buffer-valued store (ZooKeeper node data). */
  sealBytes(kind: string, where: string, body: string): Buffer {
    return Buffer.from(this.seal(kind, where, body), 'utf8');
  }

  /** The body of a sealed record read from `where`, if it was sealed as `kind` for `where` under a known secret. */
  open(kind: string, where: string, data: string | Buffer): Opened {
    let wire: Partial<Wire>;
    try {
      const parsed: unknown = JSON.parse(typeof data === 'string' ? data : data.toString('utf8'));
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return { ok: false, reason: 'unsealed' };
      wire = parsed as Partial<Wire>;
    } catch {
      return { ok: false, reason: 'unsealed' };
    }
    if (typeof wire.seal !== 'string' || typeof wire.kind !== 'string' || typeof wire.mac !== 'string' || typeof wire.body !== 'string')
      return { ok: false, reason: 'unsealed' };
    if (wire.seal !== SEAL_VERSION) return { ok: false, reason: 'unknown-version' };
    if (wire.kind !== kind) return { ok: false, reason: 'wrong-kind' };
    const given = Buffer.from(wire.mac, 'base64url');
    for (const key of this.keys) {
      const expected = Buffer.from(mac(key, kind, where, wire.body), 'base64url');
      if (given.length === expected.length && timingSafeEqual(given, expected)) return { ok: true, body: wire.body };
    }
    return { ok: false, reason: 'bad-mac' };
  }

  /** `open`, then JSON.parse of the body; a body that is not JSON counts as a bad record too. */
  openJson(
    kind: string,
    where: string,
    data: string | Buffer,
  ): { ok: true; value: unknown } | { ok: false; reason: SealFailure | 'malformed' } {
    const opened = this.open(kind, where, data);
    if (!opened.ok) return opened;
    try {
      return { ok: true, value: JSON.parse(opened.body) };
    } catch {
      return { ok: false, reason: 'malformed' };
    }
  }
}

/**
 * HMAC over the seal version, kind, place and body, each length-prefixed so no two different
 * tuples give the same input (a kind ending in what a place begins with, etc.).
 */
function mac(key: Buffer, kind: string, where: string, body: string): string {
  const h = createHmac('sha256', key);
  for (const part of [SEAL_VERSION, kind, where, body]) {
    const bytes = Buffer.from(part, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32BE(bytes.length);
    h.update(len);
    h.update(bytes);
  }
  return h.digest('base64url');
}
