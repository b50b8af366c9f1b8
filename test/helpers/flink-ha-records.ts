import { randomBytes } from 'node:crypto';

/**
 * A leader record as Flink's ZooKeeperUtils writes it — Java serialization of writeUTF(address)
 * then writeObject(UUID) — for tests that play Flink's leader election against a live gateway.
 * The class descriptor is java.util.UUID's, byte for byte as Flink 1.20–2.3 write it.
 */
export function leaderRecordBytes(address: string, sessionId: Buffer = randomBytes(16)): Buffer {
  const utf = Buffer.from(address, 'utf8');
  const head = Buffer.alloc(8);
  head.writeUInt16BE(0xaced, 0);
  head.writeUInt16BE(5, 2);
  head[4] = 0x77; // TC_BLOCKDATA
  head[5] = utf.length + 2;
  head.writeUInt16BE(utf.length, 6);
  const uuidClass = Buffer.from(
    '7372000e6a6176612e7574696c2e55554944bc9903f7986d852f0200024a000c6c65617374536967426974734a000b6d6f73745369674269747378',
    'hex',
  );
  // TC_NULL (no superclass), then the fields: leastSigBits, mostSigBits.
  return Buffer.concat([head, utf, uuidClass, Buffer.from([0x70]), sessionId.subarray(8, 16), sessionId.subarray(0, 8)]);
}
