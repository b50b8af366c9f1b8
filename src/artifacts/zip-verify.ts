import yauzl from 'yauzl';

/**
 * Checks that a downloaded file is a readable zip with at least one entry, by walking its central
 * directory (cheap: no entry is decompressed). Resolves to the reason it is not, or undefined.
 */
export function zipProblem(path: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    yauzl.open(path, { lazyEntries: true, autoClose: true }, (err, zip) => {
      if (err || !zip) return resolve(err?.message ?? 'unreadable zip');
      if (zip.entryCount === 0) {
        zip.close();
        return resolve('the zip has no entries');
      }
      zip.on('error', (e: Error) => resolve(e.message));
      zip.on('end', () => resolve(undefined));
      zip.on('entry', () => zip.readEntry());
      zip.readEntry();
    });
  });
}
