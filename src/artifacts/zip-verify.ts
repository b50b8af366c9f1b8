import { open } from 'node:fs/promises';
import { type JarEntryPoints, walkJar } from './jar-entry-points';
import { DEFAULT_ZIP_LIMITS, ManifestScanner, readZipEnd, ZIP_TAIL, type ZipLimits, type ZipRefusal } from './zip-bounds';

/**
 * Checks that a downloaded file is a readable zip with at least one entry, within the zip-structure
 * bounds (zip-bounds.ts), before it is cached or handed to the JobManager. The bounds come first
 * and read only the end records and the central directory (no more than
 * gateway.artifacts.max-central-directory-size); then the central directory is walked (cheap: no
 * entry is decompressed). Resolves to the reason it is not a usable jar, or undefined.
 */
export async function zipProblem(path: string, limits: ZipLimits = DEFAULT_ZIP_LIMITS): Promise<ZipRefusal | undefined> {
  return (await inspectJar(path, limits)).problem;
}

/**
 * `zipProblem` and, in the same walk, what the jar can start (its top-level classes and its
 * manifest's entry class), for callers that need both (an upload, checked and classified at once).
 * `points` is set only when there is no problem.
 */
export async function inspectJar(
  path: string,
  limits: ZipLimits = DEFAULT_ZIP_LIMITS,
): Promise<{ problem?: ZipRefusal; points?: JarEntryPoints }> {
  const bounds = await boundsProblem(path, limits);
  if (bounds) return { problem: bounds };
  const walked = await walkJar(path, limits);
  return 'reason' in walked ? { problem: walked } : { points: walked };
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
