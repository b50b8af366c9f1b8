import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { crc32 } from 'node:zlib';
import yauzl from 'yauzl';

async function readEntries(jar: string): Promise<{ name: string; data: Buffer }[]> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(jar, { lazyEntries: true }, (e, z) => (e || !z ? reject(e) : resolve(z))),
  );
  const out: { name: string; data: Buffer }[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('entry', (entry: yauzl.Entry) => {
      if (entry.fileName.endsWith('/')) return zip.readEntry();
      zip.openReadStream(entry, (err, stream) => {
        if (err || !stream) return reject(err);
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          out.push({ name: entry.fileName, data: Buffer.concat(chunks) });
          zip.readEntry();
        });
      });
    });
    zip.on('end', () => resolve());
    zip.on('error', reject);
    zip.readEntry();
  });
  return out;
}

/**
 * A real Flink job jar made large: its entries re-stored (uncompressed) plus one STORED entry of
 * `padBytes` random bytes, written streaming (memory stays flat). The padding is a repeated 1 MiB
 * random block: incompressible enough, and fast to produce. Returns size and SHA-256.
 */
export async function writePaddedJar(sourceJar: string, out: string, padBytes: number): Promise<{ size: number; sha256: string }> {
  const entries = await readEntries(sourceJar);
  const block = randomBytes(1024 * 1024);
  let padCrc = 0;
  for (let left = padBytes; left > 0; left -= block.length) padCrc = crc32(block.subarray(0, Math.min(left, block.length)), padCrc);
  const file = createWriteStream(out);
  const hash = createHash('sha256');
  let offset = 0;
  const write = async (buf: Buffer) => {
    hash.update(buf);
    offset += buf.length;
    if (!file.write(buf)) await once(file, 'drain');
  };
  const central: Buffer[] = [];
  const header = (sig: number, name: Buffer, crc: number, size: number, localOffset?: number) => {
    const central_ = localOffset !== undefined;
    const h = Buffer.alloc(central_ ? 46 : 30);
    h.writeUInt32LE(sig, 0);
    h.writeUInt16LE(20, 4);
    if (central_) h.writeUInt16LE(20, 6);
    const o = central_ ? 2 : 0; // central headers have "version made by" first
    h.writeUInt32LE(crc >>> 0, 14 + o);
    h.writeUInt32LE(size, 18 + o);
    h.writeUInt32LE(size, 22 + o);
    h.writeUInt16LE(name.length, 26 + o);
    if (central_) h.writeUInt32LE(localOffset, 42);
    return h;
  };
  const all = [
    ...entries.map((e) => ({ name: e.name, data: e.data as Buffer | undefined, size: e.data.length, crc: crc32(e.data) })),
    { name: 'padding.bin', data: undefined, size: padBytes, crc: padCrc },
  ];
  for (const e of all) {
    const name = Buffer.from(e.name);
    const at = offset;
    await write(header(0x04034b50, name, e.crc, e.size));
    await write(name);
    if (e.data) await write(e.data);
    else for (let left = padBytes; left > 0; left -= block.length) await write(block.subarray(0, Math.min(left, block.length)));
    central.push(header(0x02014b50, name, e.crc, e.size, at), name);
  }
  const cd = Buffer.concat(central);
  const cdOffset = offset;
  await write(cd);
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(all.length, 8);
  eocd.writeUInt16LE(all.length, 10);
  eocd.writeUInt32LE(cd.length, 12);
  eocd.writeUInt32LE(cdOffset, 16);
  await write(eocd);
  file.end();
  await once(file, 'close');
  return { size: offset, sha256: hash.digest('hex') };
}
