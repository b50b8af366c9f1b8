import { open } from 'node:fs/promises';
import yauzl from 'yauzl';
import { DEFAULT_ZIP_LIMITS, ManifestScanner, readZipEnd, ZIP_TAIL, type ZipLimits, type ZipRefusal } from './zip-bounds';

/**
 * Checks that a downloaded file is a readable zip with at least one entry, within the zip-structure
 * bounds (zip-bounds.ts), before it is cached or handed to the JobManager. The bounds come first
 * and read only the end records and the central directory (no more than
 * user.artifacts.max-central-directory-size); then the central directory is walked (cheap: no
 * entry is decompressed). Resolves to the reason it is not a usable jar, or undefined.
 */
export async function zipProblem(path: string, limits: ZipLimits = DEFAULT_ZIP_LIMITS): Promise<ZipRefusal | undefined> {
  const bounds = await boundsProblem(path, limits);
  if (bounds) return bounds;
  return new Promise((resolve) => {
    yauzl.open(path, { lazyEntries: true, autoClose: true }, (err, zip) => {
      if (err || !zip) return resolve({ reason: err?.message ?? 'unreadable zip' });
      if (zip.entryCount === 0) {
        zip.close();
        return resolve({ reason: 'the zip has no entries' });
      }
      zip.on('error', (e: Error) => resolve({ reason: e.message }));
      zip.on('end', () => resolve(undefined));
      zip.on('entry', (entry: yauzl.Entry) => {
        if (entry.fileName.toUpperCase() !== 'META-INF/MANIFEST.MF') return zip.readEntry();
        // Java's JarFile inflates the manifest to its end whatever the central directory says; its
        // declared size is bounded above, and yauzl stops a stream that inflates past it, so this
        // read is bounded too: a manifest bomb is caught here, not on the JobManager's heap.
        zip.openReadStream(entry, (e, stream) => {
          if (e || !stream) return resolve({ reason: `the manifest cannot be read: ${e?.message ?? 'no stream'}` });
          stream.on('error', (se: Error) => {
            zip.close();
            resolve({ reason: `the manifest does not inflate to its declared ${entry.uncompressedSize} bytes (${se.message})`, limit: 'user.artifacts.max-manifest-size' });
          });
          stream.on('end', () => zip.readEntry());
          stream.resume();
        });
      });
      zip.readEntry();
    });
  });
}

/** The end records' bounds, then every central-directory header for an oversized manifest. */
async function boundsProblem(path: string, limits: ZipLimits): Promise<ZipRefusal | undefined> {
  const file = await open(path, 'r');
  try {
    const total = (await file.stat()).size;
    const tail = Buffer.alloc(Math.min(total, ZIP_TAIL));
    await file.read(tail, 0, tail.length, total - tail.length);
    const end = readZipEnd(tail, total, limits);
    if ('reason' in end) return end;
    // From the central directory's start to the end: bounded, since its size was just checked.
    const manifests = new ManifestScanner(limits.maxManifestSize);
    const chunk = Buffer.alloc(256 * 1024);
    for (let at = end.cdStart; at < total; ) {
      const { bytesRead } = await file.read(chunk, 0, Math.min(chunk.length, total - at), at);
      if (bytesRead === 0) break;
      manifests.push(chunk.subarray(0, bytesRead));
      at += bytesRead;
    }
    return manifests.oversizedFrom(0);
  } finally {
    await file.close();
  }
}
