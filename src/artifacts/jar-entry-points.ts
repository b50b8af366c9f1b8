import yauzl from 'yauzl';
import { DEFAULT_ZIP_LIMITS, type ZipLimits, type ZipRefusal } from './zip-bounds';

/** What a jar can start: its top-level classes and the entry class its manifest names. */
export interface JarEntryPoints {
  /** Binary names (`com.example.Main`, `com.example.Outer$Inner`) of the jar's own top-level .class entries. */
  classes: ReadonlySet<string>;
  /** Flink's `program-class` manifest attribute, else `Main-Class`: what runs when no entryClass is given. */
  manifestEntryClass?: string;
  /** True when the jar has a manifest larger than `limits.maxManifestSize`, which was not read. */
  manifestUnread?: boolean;
}

/**
 * Lists a jar's classes and reads its manifest's entry class (one walk of its central directory,
 * `walkJar`). The file has passed `zipProblem` when it was cached, so the walk is bounded;
 * `limits.maxManifestSize` caps what is inflated. Classes in nested jars (`lib/*.jar`) are not listed.
 */
export async function jarEntryPoints(path: string, limits: ZipLimits = DEFAULT_ZIP_LIMITS): Promise<JarEntryPoints> {
  const walked = await walkJar(path, limits);
  if ('reason' in walked) throw new Error(walked.reason);
  return walked;
}

/**
 * Walks the central directory: lists the top-level classes (nested `lib/*.jar` are not opened) and
 * reads the manifest. Java's JarFile inflates the manifest to its end whatever the central
 * directory says; a manifest declared above `limits.maxManifestSize` is not read (`manifestUnread`;
 * `inspectJar` has refused such a jar already), and yauzl stops a stream that inflates past its
 * declared size, so this read is bounded too: a manifest bomb is caught here, not on the
 * JobManager's heap.
 */
export function walkJar(path: string, limits: ZipLimits): Promise<JarEntryPoints | ZipRefusal> {
  return new Promise((resolve) => {
    yauzl.open(path, { lazyEntries: true, autoClose: true }, (err, zip) => {
      if (err || !zip) return resolve({ reason: err?.message ?? 'unreadable zip' });
      if (zip.entryCount === 0) {
        zip.close();
        return resolve({ reason: 'the zip has no entries' });
      }
      const classes = new Set<string>();
      let manifest: string | undefined;
      let manifestUnread = false;
      zip.on('error', (e: Error) => resolve({ reason: e.message }));
      zip.on('end', () => {
        const entry = manifest === undefined ? undefined : manifestEntryClass(manifest);
        resolve({ classes, ...(entry !== undefined ? { manifestEntryClass: entry } : {}), ...(manifestUnread ? { manifestUnread } : {}) });
      });
      zip.on('entry', (entry: yauzl.Entry) => {
        const name = entry.fileName;
        if (name.endsWith('.class') && !name.startsWith('META-INF/')) classes.add(name.slice(0, -'.class'.length).replaceAll('/', '.'));
        if (name.toUpperCase() !== 'META-INF/MANIFEST.MF') return zip.readEntry();
        if (entry.uncompressedSize > limits.maxManifestSize) {
          manifestUnread = true;
          return zip.readEntry();
        }
        zip.openReadStream(entry, (e, stream) => {
          if (e || !stream) return resolve({ reason: `the manifest cannot be read: ${e?.message ?? 'no stream'}` });
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('error', (se: Error) => {
            zip.close();
            resolve({
              reason: `the manifest does not inflate to its declared ${entry.uncompressedSize} bytes (${se.message})`,
              limit: 'gateway.artifacts.max-manifest-size',
            });
          });
          stream.on('end', () => {
            manifest = Buffer.concat(chunks).toString('utf8');
            zip.readEntry();
          });
        });
      });
      zip.readEntry();
    });
  });
}

/** `program-class` (Flink's own attribute, which wins) or `Main-Class` of a manifest's main section. */
export function manifestEntryClass(text: string): string | undefined {
  // Continuation lines start with one space (the manifest format wraps at 72 bytes).
  const lines = text.replace(/\r\n?/g, '\n').replace(/\n /g, '').split('\n');
  const attrs = new Map<string, string>();
  for (const line of lines) {
    if (line === '') break; // the main section ends at the first blank line
    const i = line.indexOf(':');
    if (i > 0) attrs.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  const value = attrs.get('program-class') || attrs.get('main-class');
  return value === undefined || value === '' ? undefined : value;
}
