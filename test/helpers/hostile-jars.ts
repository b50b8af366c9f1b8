import { crc32, deflateRawSync } from 'node:zlib';

/** One STORED entry of a crafted zip; its central-directory header may lie about the size. */
export interface CraftedEntry {
  name: string;
  data?: string | Buffer;
  /** Uncompressed size the central directory declares, instead of the real one (32-bit). */
  declaredSize?: number;
  /** Declares 0xffffffff plus a zip64 extra field with this uncompressed size. */
  zip64Size?: bigint;
  /** Stores `data` DEFLATEd (method 8); `declaredSize` then lies in both headers (a manifest bomb). */
  deflate?: boolean;
}

export interface CraftedZip {
  entries: CraftedEntry[];
  /** Entry count the end record declares (both count fields), instead of the real one. */
  eocdEntries?: number;
  /** Central-directory size the end record declares, instead of the real one. */
  eocdCdSize?: number;
  /**
   * Adds a zip64 end record and locator (the end record then holds the 0xffff / 0xffffffff
   * markers). Counts and size default to the real ones; `recordAt` points the locator elsewhere.
   */
  zip64?: { entries?: bigint; cdSize?: bigint; recordAt?: bigint };
  comment?: string | Buffer;
}

/**
 * Writes a small zip whose end records and central-directory headers say what the test wants:
 * billions of entries, a central directory of terabytes, a manifest of gigabytes — in a few
 * hundred bytes, since nothing checks those claims against real data.
 */
export function craftZip(z: CraftedZip): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of z.entries) {
    const plain = Buffer.isBuffer(e.data) ? e.data : Buffer.from(e.data ?? '');
    const data = e.deflate ? deflateRawSync(plain) : plain;
    const name = Buffer.from(e.name);
    const crc = crc32(plain);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.deflate ? 8 : 0, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(e.deflate ? (e.declaredSize ?? plain.length) : data.length, 22);
    local.writeUInt16LE(name.length, 26);
    locals.push(local, name, data);
    const extra = Buffer.alloc(e.zip64Size !== undefined ? 12 : 0);
    if (e.zip64Size !== undefined) {
      extra.writeUInt16LE(0x0001, 0);
      extra.writeUInt16LE(8, 2);
      extra.writeBigUInt64LE(e.zip64Size, 4);
    }
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(45, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(e.deflate ? 8 : 0, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(e.zip64Size !== undefined ? 0xffffffff : (e.declaredSize ?? plain.length), 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt16LE(extra.length, 30);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, name, extra);
    offset += 30 + name.length + data.length;
  }
  const cd = Buffer.concat(centrals);
  const tail: Buffer[] = [];
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  const count = z.eocdEntries ?? z.entries.length;
  if (z.zip64) {
    const record = Buffer.alloc(56);
    record.writeUInt32LE(0x06064b50, 0);
    record.writeBigUInt64LE(44n, 4);
    record.writeUInt16LE(45, 12);
    record.writeUInt16LE(45, 14);
    record.writeBigUInt64LE(z.zip64.entries ?? BigInt(z.entries.length), 24);
    record.writeBigUInt64LE(z.zip64.entries ?? BigInt(z.entries.length), 32);
    record.writeBigUInt64LE(z.zip64.cdSize ?? BigInt(cd.length), 40);
    record.writeBigUInt64LE(BigInt(offset), 48);
    const locator = Buffer.alloc(20);
    locator.writeUInt32LE(0x07064b50, 0);
    locator.writeBigUInt64LE(z.zip64.recordAt ?? BigInt(offset + cd.length), 8);
    locator.writeUInt32LE(1, 16);
    tail.push(record, locator);
    eocd.writeUInt16LE(0xffff, 8);
    eocd.writeUInt16LE(0xffff, 10);
    eocd.writeUInt32LE(0xffffffff, 12);
    eocd.writeUInt32LE(0xffffffff, 16);
  } else {
    eocd.writeUInt16LE(count, 8);
    eocd.writeUInt16LE(count, 10);
    eocd.writeUInt32LE(z.eocdCdSize ?? cd.length, 12);
    eocd.writeUInt32LE(offset, 16);
  }
  const comment = Buffer.isBuffer(z.comment) ? z.comment : Buffer.from(z.comment ?? '');
  eocd.writeUInt16LE(comment.length, 20);
  return Buffer.concat([...locals, cd, ...tail, eocd, comment]);
}

/**
 * A 22-byte end record that is not the real one (for a decoy inside a comment): it declares one
 * entry and a central directory of 0 bytes, and a comment length that does not reach the end.
 */
export function decoyEndRecord(): Buffer {
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(1, 8);
  eocd.writeUInt16LE(1, 10);
  eocd.writeUInt16LE(7, 20);
  return eocd;
}
