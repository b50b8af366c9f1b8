import { lstatSync, mkdirSync, type Stats } from 'node:fs';

/**
 * Directories the gateway keeps its state in (the jar cache, job registrations and claims, the
 * token bridge secret) must be its own: another local user who created one first — the default
 * cache lives under the shared temporary directory — could plant jars or secrets there. Creates
 * `dir` (and missing parents) owner-only (0700); refuses one that is a symlink, is owned by another
 * user, or that others may write. Group write is accepted only for the gateway's own groups (a
 * Kubernetes volume with fsGroup, shared with the JobManager running as the same user).
 */
export function ensurePrivateDir(dir: string, what: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const problem = privateDirProblem(lstatSync(dir));
  if (problem !== undefined) {
    throw new Error(
      `${what} ${dir} ${problem}; use a directory of the gateway's own user (created 0700 when missing) or fix it with chown/chmod`,
    );
  }
}

/** Why `st` is not a private directory of this process's user, or undefined. */
export function privateDirProblem(st: Stats, uid = process.getuid?.(), groups = ownGroups()): string | undefined {
  if (st.isSymbolicLink()) return 'is a symbolic link';
  if (!st.isDirectory()) return 'is not a directory';
  if (uid !== undefined && st.uid !== uid) return `is owned by uid ${st.uid}, not the gateway's uid ${uid}`;
  if ((st.mode & 0o002) !== 0) return `is writable by every user (mode ${(st.mode & 0o7777).toString(8)})`;
  if ((st.mode & 0o020) !== 0 && !groups.has(st.gid))
    return `is writable by group ${st.gid}, which the gateway is not in (mode ${(st.mode & 0o7777).toString(8)})`;
  return undefined;
}

/** Why a secret file is not the gateway's own, or undefined (owner-only readers are checked elsewhere). */
export function foreignFileProblem(st: Stats, uid = process.getuid?.()): string | undefined {
  if (!st.isFile()) return 'is not a regular file';
  if (uid !== undefined && st.uid !== uid) return `is owned by uid ${st.uid}, not the gateway's uid ${uid}`;
  if ((st.mode & 0o022) !== 0) return `is writable by group or others (mode ${(st.mode & 0o7777).toString(8)})`;
  return undefined;
}

function ownGroups(): Set<number> {
  const groups = new Set<number>(process.getgroups?.() ?? []);
  const gid = process.getgid?.();
  if (gid !== undefined) groups.add(gid);
  return groups;
}
