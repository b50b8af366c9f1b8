import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { basename } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { crc32 } from 'node:zlib';

/** One artifact to nest: a cached jar and the name it gets under `lib/`. */
export interface NestedArtifact {
  path: string;
  /** File name under lib/ (made unique and safe by the caller). */
  name: string;
}

const EOCD_SIG = 0x06054b50;
const EOCD_LEN = 22;
const LOCAL_SIG = 0x04034b50;
const CENTRAL_SIG = 0x02014b50;
const ZIP64_LOCATOR_SIG = 0x07064b50;

/**
 * Writes `out`: the job jar with each artifact added as a STORED `lib/<name>` entry. Flink's
 * `PackagedProgram` puts nested `lib/*.jar` on the job's user classpath, so this is how a session
 * cluster gets `user.artifacts.artifact-list`. The job jar's bytes up to its central directory are
 * copied verbatim (entries keep their offsets, nothing is recompressed), the new entries follow, then
 * the old central directory records plus the new ones and a new end record. Resolves to the output's
 * SHA-256. Zip64 job jars are refused (a plain zip holds 65535 entries and 4 GiB).
 */
export async function nestArtifacts(
  jobJar: string,
  artifacts: readonly NestedArtifact[],
  out: string,
): Promise<{ sha256: string; size: number }> {
  const end = await readEnd(jobJar);
  const hash = createHash('sha256');
  const file = createWriteStream(out, { flags: 'wx', mode: 0o600 });
  let written = 0;
  const write = (b: Buffer) =>
    new Promise<void>((resolve, reject) => {
      hash.update(b);
      written += b.length;
      file.write(b, (err) => (err ? reject(err) : resolve()));
    });
  try {
    // 1. Everything before the central directory, verbatim (entries, and any prefix Java tolerates).
    await copyRange(jobJar, 0, end.cdStart, async (chunk) => write(chunk));
    // 2. The artifacts, STORED, each with a local header.
    const records: Buffer[] = [];
    for (const a of artifacts) {
      const data = await crcAndSize(a.path);
      const name = Buffer.from(`lib/${a.name}`, 'utf8');
      const offset = written - end.locpos;
      const local = Buffer.alloc(30);
      local.writeUInt32LE(LOCAL_SIG, 0);
      local.writeUInt16LE(10, 4); // version needed
      local.writeUInt16LE(0x0800, 6); // UTF-8 names
      local.writeUInt16LE(0, 8); // STORED
      local.writeUInt32LE(0, 10); // time/date: 1980-00-00, as reproducible builds write it
      local.writeUInt32LE(data.crc, 14);
      local.writeUInt32LE(data.size, 18);
      local.writeUInt32LE(data.size, 22);
      local.writeUInt16LE(name.length, 26);
      local.writeUInt16LE(0, 28);
      await write(local);
      await write(name);
      await copyRange(a.path, 0, data.size, async (chunk) => write(chunk));
      const central = Buffer.alloc(46);
      central.writeUInt32LE(CENTRAL_SIG, 0);
      central.writeUInt16LE(20, 4); // made by
      central.writeUInt16LE(10, 6);
      central.writeUInt16LE(0x0800, 8);
      central.writeUInt16LE(0, 10);
      central.writeUInt32LE(0, 12);
      central.writeUInt32LE(data.crc, 16);
      central.writeUInt32LE(data.size, 20);
      central.writeUInt32LE(data.size, 24);
      central.writeUInt16LE(name.length, 28);
      central.writeUInt32LE(offset, 42);
      records.push(central, name);
    }
    // 3. The job jar's central directory records, then the new ones, then the end record.
    const cdOffset = written - end.locpos;
    await copyRange(jobJar, end.cdStart, end.cdStart + end.cdSize, async (chunk) => write(chunk));
    for (const r of records) await write(r);
    const cdSize = end.cdSize + records.reduce((n, r) => n + r.length, 0);
    const entries = end.entries + artifacts.length;
    if (entries > 0xffff || written > 0xffffffff)
      throw new Error('the jar with its artifacts would need zip64, which nesting does not write');
    const eocd = Buffer.alloc(EOCD_LEN);
    eocd.writeUInt32LE(EOCD_SIG, 0);
    eocd.writeUInt16LE(entries, 8);
    eocd.writeUInt16LE(entries, 10);
    eocd.writeUInt32LE(cdSize, 12);
    eocd.writeUInt32LE(cdOffset, 16);
    await write(eocd);
    await new Promise<void>((resolve, reject) => file.end((err?: Error | null) => (err ? reject(err) : resolve())));
  } catch (err) {
    file.destroy();
    throw err;
  }
  return { sha256: hash.digest('hex'), size: written };
}

/** A file name for lib/: the artifact's own base name, made safe; prefixed by its position to stay unique. */
export function libName(index: number, uriPath: string): string {
  const base =
    basename(uriPath)
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .replace(/^\.+/, '') || 'artifact.jar';
  return `${String(index).padStart(2, '0')}-${base.endsWith('.jar') ? base : `${base}.jar`}`;
}

interface End {
  entries: number;
  cdSize: number;
  /** Where the central directory really starts (end record position minus its size). */
  cdStart: number;
  /** Java's "locpos": actual positions minus the offsets the zip declares (bytes prepended to the zip). */
  locpos: number;
}

async function readEnd(path: string): Promise<End> {
  const fh = await open(path, 'r');
  try {
    const total = (await fh.stat()).size;
    const tailLen = Math.min(total, EOCD_LEN + 0xffff);
    const tail = Buffer.alloc(tailLen);
    await fh.read(tail, 0, tailLen, total - tailLen);
    for (let i = tail.length - EOCD_LEN; i >= 0; i--) {
      if (tail.readUInt32LE(i) !== EOCD_SIG || tail.readUInt16LE(i + 20) !== tail.length - i - EOCD_LEN) continue;
      if (i >= 20 && tail.readUInt32LE(i - 20) === ZIP64_LOCATOR_SIG)
        throw new Error('the job jar is a zip64 file; nesting artifacts into it is not supported');
      const entries = tail.readUInt16LE(i + 10);
      const cdSize = tail.readUInt32LE(i + 12);
      const cdOffset = tail.readUInt32LE(i + 16);
      const eocdAt = total - tailLen + i;
      const cdStart = eocdAt - cdSize;
      if (cdStart < 0) throw new Error("the job jar's central directory does not fit the file");
      return { entries, cdSize, cdStart, locpos: cdStart - cdOffset };
    }
    throw new Error('the job jar has no zip end record');
  } finally {
    await fh.close();
  }
}

async function crcAndSize(path: string): Promise<{ crc: number; size: number }> {
  let crc = 0;
  let size = 0;
  await pipeline(createReadStream(path, { highWaterMark: 1024 * 1024 }), async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) {
      crc = crc32(chunk, crc);
      size += chunk.length;
    }
  });
  if (size > 0xffffffff) throw new Error(`${basename(path)} is larger than 4 GiB`);
  return { crc, size };
}

async function copyRange(path: string, start: number, endExclusive: number, onChunk: (chunk: Buffer) => Promise<void>): Promise<void> {
  if (endExclusive <= start) return;
  const stream = createReadStream(path, { start, end: endExclusive - 1, highWaterMark: 1024 * 1024 });
  for await (const chunk of stream) await onChunk(chunk as Buffer);
}
