import yauzl from 'yauzl';
import { DEFAULT_ZIP_LIMITS, type ZipLimits } from './zip-bounds';

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
 * Lists a jar's classes and reads its manifest's entry class. The file has passed `zipProblem`
 * (bounded central directory and manifest), so this walk is bounded too; `limits.maxManifestSize`
 * caps what is inflated. Classes in nested jars (`lib/*.jar`) are not listed.
 */
export function jarEntryPoints(path: string, limits: ZipLimits = DEFAULT_ZIP_LIMITS): Promise<JarEntryPoints> {
  return new Promise((resolve, reject) => {
    yauzl.open(path, { lazyEntries: true, autoClose: true }, (err, zip) => {
      if (err || !zip) return reject(err ?? new Error('unreadable zip'));
      const classes = new Set<string>();
      let manifest: string | undefined;
      let manifestUnread = false;
      zip.on('error', reject);
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
          if (e || !stream) return reject(e ?? new Error('the manifest cannot be read'));
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('error', reject);
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
