import { artifactOptions, type ZipLimits } from './options';

export type { ZipLimits };

export const DEFAULT_ZIP_LIMITS: ZipLimits = {
  maxEntries: artifactOptions.maxZipEntries.default!,
  maxCentralDirectorySize: artifactOptions.maxCentralDirectorySize.default!,
  maxManifestSize: artifactOptions.maxManifestSize.default!,
};

const EOCD_SIG = Buffer.from([0x50, 0x4b, 0x05, 0x06]);
const ZIP64_LOCATOR_SIG = 0x07064b50;
const ZIP64_END_SIG = 0x06064b50;
const EOCD_LEN = 22;
const ZIP64_LOCATOR_LEN = 20;
const ZIP64_END_LEN = 56;
/** An end-of-central-directory record is 22 bytes plus a comment of at most 65535 bytes. */
export const EOCD_SEARCH = EOCD_LEN + 0xffff;
/** The tail a caller keeps: the end-record search window plus the zip64 locator and end record before it. */
export const ZIP_TAIL = EOCD_SEARCH + ZIP64_LOCATOR_LEN + ZIP64_END_LEN;

/** A refusal: `limit` is the option key when a bound (not the zip format) was broken. */
export interface ZipRefusal {
  reason: string;
  limit?: string;
}

/** What the end records of a zip declare, read the way Java's ZipFile reads them. */
export interface ZipEnd {
  /** Entry count of the last end record (0: an empty zip). */
  entries: number;
  /**
   * Absolute offset where the central directory starts: Java takes it as the end record's
   * position (or the zip64 end record's) minus the declared size, not the declared offset.
   * The lowest of the candidates (see `readZipEnd`), never below 0.
   */
  cdStart: number;
}

const u64 = (b: Buffer, at: number) => Number(b.readBigUInt64LE(at));

/**
 * Finds the end record(s) in `tail` (the last bytes of a file of `total` bytes, starting at
 * absolute offset `total - tail.length`) and checks the entry count and central-directory size
 * each declares (zip64 included) against `limits`. Java's ZipFile scans back from the end and
 * takes the last record whose comment length reaches the end of the file exactly, or failing
 * that one whose central directory checks out on disk; a stream cannot check the latter, so when
 * the last record does not fit exactly, every record in the window is checked, so that a decoy
 * record in a comment cannot hide the real one.
 */
export function readZipEnd(tail: Buffer, total: number, limits: ZipLimits): ZipEnd | ZipRefusal {
  const tailStart = total - tail.length;
  const windowStart = Math.max(0, tail.length - EOCD_SEARCH);
  const found: number[] = [];
  for (let i = tail.length - EOCD_LEN; i >= windowStart; i--) {
    i = tail.lastIndexOf(EOCD_SIG, i);
    if (i < windowStart) break;
    found.push(i);
    if (tail.readUInt16LE(i + 20) === tail.length - i - EOCD_LEN) break; // Java stops at an exact fit
  }
  if (found.length === 0) return { reason: 'it has no zip end-of-central-directory record (truncated or not a zip)' };
  let entries = 0;
  let cdSize = 0;
  let cdStart = Number.POSITIVE_INFINITY;
  for (const at of found) {
    const count = Math.max(tail.readUInt16LE(at + 8), tail.readUInt16LE(at + 10));
    const size = tail.readUInt32LE(at + 12);
    const z64 = zip64End(tail, tailStart, total, at);
    if (typeof z64 === 'string') return { reason: z64 };
    if (z64) {
      // Java takes the zip64 figures when the end record holds the 0xffff/0xffffffff markers or
      // the same figures; count a marker as no figure, and both otherwise.
      entries = Math.max(entries, z64.entries, count === 0xffff ? 0 : count);
      cdSize = Math.max(cdSize, z64.cdSize, size === 0xffffffff ? 0 : size);
      cdStart = Math.min(cdStart, z64.at - z64.cdSize, size === 0xffffffff ? Number.POSITIVE_INFINITY : tailStart + at - size);
    } else {
      entries = Math.max(entries, count);
      cdSize = Math.max(cdSize, size);
      cdStart = Math.min(cdStart, tailStart + at - size);
    }
  }
  if (entries > limits.maxEntries) {
    const key = artifactOptions.maxZipEntries.key;
    return {
      limit: key,
      reason: `its central directory declares ${entries} entries, more than ${key} (${limits.maxEntries}); if the jar is genuine, raise ${key}`,
    };
  }
  if (cdSize > limits.maxCentralDirectorySize) {
    const key = artifactOptions.maxCentralDirectorySize.key;
    return {
      limit: key,
      reason: `its central directory is ${cdSize} bytes, more than ${key} (${limits.maxCentralDirectorySize} bytes); if the jar is genuine, raise ${key}`,
    };
  }
  return { entries: tail.readUInt16LE(found[0]! + 10), cdStart: Math.max(0, cdStart) };
}

/**
 * The zip64 end record Java would use for the end record at `at`: it always looks for a zip64
 * locator right before the end record and reads the record wherever the locator points. A
 * string when the record lies before the bytes kept, where its figures cannot be checked: a zip
 * writer puts it right before the locator, only a crafted zip puts it further back.
 */
function zip64End(
  tail: Buffer,
  tailStart: number,
  total: number,
  at: number,
): { at: number; entries: number; cdSize: number } | string | undefined {
  const loc = at - ZIP64_LOCATOR_LEN;
  if (loc < 0 || tail.readUInt32LE(loc) !== ZIP64_LOCATOR_SIG) return undefined;
  const recordAt = u64(tail, loc + 8);
  if (recordAt + ZIP64_END_LEN > total) return undefined; // past the end: Java ignores it too
  if (recordAt < tailStart)
    return `its zip64 end record lies ${tailStart + loc - recordAt} bytes before the zip64 locator; a zip writer puts it right before`;
  const r = recordAt - tailStart;
  if (tail.readUInt32LE(r) !== ZIP64_END_SIG) return undefined;
  return { at: recordAt, entries: Math.max(u64(tail, r + 24), u64(tail, r + 32)), cdSize: u64(tail, r + 40) };
}

const CENTRAL_SIG = Buffer.from([0x50, 0x4b, 0x01, 0x02]);
const CENTRAL_LEN = 46;
const MANIFEST = Buffer.from('META-INF/MANIFEST.MF');
/** A central header is at most 46 bytes plus a 64 KiB name and a 64 KiB extra field (the comment is not read). */
const MAX_CENTRAL = CENTRAL_LEN + 2 * 0xffff;

/** META-INF/MANIFEST.MF in any letter case, as Java's ZipFile matches it (punctuation exactly). */
export function isManifestName(b: Buffer, at: number): boolean {
  for (let i = 0; i < MANIFEST.length; i++) {
    const want = MANIFEST[i]!;
    const got = b[at + i]!;
    if (want >= 0x41 && want <= 0x5a ? (got | 0x20) !== (want | 0x20) : got !== want) return false;
  }
  return true;
}

/**
 * Watches a byte stream for central-directory headers named META-INF/MANIFEST.MF whose declared
 * uncompressed size (zip64 extra field included) is above the limit, and remembers where the last
 * one was. The central directory is at the end of a jar and is only located once the end record
 * has been read, so the scan covers every byte; but only a header at or after the central
 * directory's start counts (`oversizedFrom`): one inside an entry's data (a nested jar) is no
 * business of the JobManager's, and one after the central directory (in a comment) is hostile
 * anyway. Memory: one offset and at most one partial header.
 */
export class ManifestScanner {
  private lastOversized = -1;
  private lastOversizedSize = 0;
  /** Bytes of the previous chunks still needed: a partial signature or a partial header. */
  private carry = Buffer.alloc(0);
  private carryStart = 0;
  private pos = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    const base = this.pos;
    this.pos += chunk.length;
    if (this.carry.length > 0) {
      // Headers that start in the carried bytes; a complete header fits in MAX_CENTRAL bytes. The
      // carry is mostly the last 3 bytes of a chunk: join the whole header's worth only when a
      // signature starts in it (joining every time copied every byte of the stream once more).
      if (this.startsInCarry(chunk)) {
        const join = Buffer.concat([this.carry, chunk.subarray(0, MAX_CENTRAL)]);
        for (let at = join.indexOf(CENTRAL_SIG); at >= 0 && at < this.carry.length; at = join.indexOf(CENTRAL_SIG, at + 1)) {
          if (!this.inspect(join, at, this.carryStart)) {
            // Still incomplete, so `join` holds all of `chunk`.
            this.carry = Buffer.from(join.subarray(at));
            this.carryStart += at;
            return;
          }
        }
      }
      if (chunk.length < 3) {
        // A signature may still start in the carry and end in a later chunk.
        this.carry = Buffer.from(Buffer.concat([this.carry, chunk]).subarray(-3));
        this.carryStart = this.pos - this.carry.length;
        return;
      }
    }
    for (let at = chunk.indexOf(CENTRAL_SIG); at >= 0; at = chunk.indexOf(CENTRAL_SIG, at + 1)) {
      if (!this.inspect(chunk, at, base)) {
        this.carry = Buffer.from(chunk.subarray(at));
        this.carryStart = base + at;
        return;
      }
    }
    // A copy: a reference would keep the whole chunk alive.
    this.carry = Buffer.from(chunk.subarray(Math.max(0, chunk.length - 3)));
    this.carryStart = this.pos - this.carry.length;
  }

  /** The refusal when an oversized manifest header lies at or after `cdStart`; call after the last push. */
  oversizedFrom(cdStart: number): ZipRefusal | undefined {
    if (this.lastOversized < 0 || this.lastOversized < cdStart) return undefined;
    const key = artifactOptions.maxManifestSize.key;
    return {
      limit: key,
      reason: `its central directory declares a META-INF/MANIFEST.MF of ${this.lastOversizedSize} bytes uncompressed, more than ${key} (${this.limit} bytes); the JobManager reads the manifest whole. If the jar is genuine, raise ${key}`,
    };
  }

  /** Whether a central-header signature starts in the carry, with `chunk` following it. */
  private startsInCarry(chunk: Buffer): boolean {
    const probe = Buffer.concat([this.carry, chunk.subarray(0, CENTRAL_SIG.length - 1)]);
    const at = probe.indexOf(CENTRAL_SIG);
    return at >= 0 && at < this.carry.length;
  }

  /** False when `b` ends before the header does. */
  private inspect(b: Buffer, at: number, base: number): boolean {
    if (b.length - at < CENTRAL_LEN) return false;
    if (b.readUInt16LE(at + 28) !== MANIFEST.length) return true;
    const name = at + CENTRAL_LEN;
    if (b.length < name + MANIFEST.length) return false;
    if (!isManifestName(b, name)) return true;
    let size = b.readUInt32LE(at + 24);
    if (size === 0xffffffff) {
      const extraStart = name + MANIFEST.length;
      const extraEnd = extraStart + b.readUInt16LE(at + 30);
      if (b.length < extraEnd) return false;
      // Without a zip64 field Java keeps 0xffffffff as the size: over any limit, like here.
      size = zip64UncompressedSize(b.subarray(extraStart, extraEnd)) ?? size;
    }
    if (size > this.limit) {
      this.lastOversized = base + at;
      this.lastOversizedSize = size;
    }
    return true;
  }
}

/** The uncompressed size in a zip64 extended-information extra field (its first value). */
function zip64UncompressedSize(extra: Buffer): number | undefined {
  for (let i = 0; i + 4 <= extra.length; ) {
    const id = extra.readUInt16LE(i);
    const len = extra.readUInt16LE(i + 2);
    if (id === 0x0001 && len >= 8 && i + 12 <= extra.length) return u64(extra, i + 4);
    i += 4 + len;
  }
  return undefined;
}
