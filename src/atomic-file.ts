import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/**
 * Replaces `target` with `text` so that readers see the old content or the new one, never a
 * part: written to a hidden temporary file next to it (owner-only, created exclusively), flushed
 * to disk, then renamed over it. The temporary file is removed when the rename fails.
 */
export async function writeFileAtomically(target: string, text: string): Promise<void> {
  const tmp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  const fh = await open(tmp, 'wx', 0o600);
  try {
    await fh.writeFile(text, 'utf8');
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    await rename(tmp, target);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
