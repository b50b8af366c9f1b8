import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';

/**
 * Flink's own distribution (`bin/ conf/ lib/ opt/ plugins/ log/`), the same Flink as the `flink`
 * Docker image, assembled from two PyPI packages because only PyPI and Maven Central are reachable
 * and `flink-dist` is on neither as a tarball:
 *
 * - `apache-flink` (a wheel): `pyflink/bin/` (Flink's scripts) and `pyflink/conf/`;
 * - `apache-flink-libraries`: `lib/` (flink-dist), `opt/`, `plugins/` and `bin/bash-java-utils.jar`
 *   (without it the 2.x scripts cannot read config.yaml). Up to 2.1.x an sdist with everything
 *   under `apache_flink_libraries-V/deps/`; from 2.2.0 a wheel with everything under `pyflink/`.
 *
 * Both are fetched with `pip download --no-deps` (nothing is installed into any Python) and
 * extracted with Python's own zipfile/tarfile (pip implies a Python). The result lives in
 * `<cacheDir>/flink-<version>`; it is assembled in a sibling directory and renamed into place
 * only when complete, so a half-assembled distribution is never used. ADR 0011.
 */
export interface DistributionOptions {
  version: string;
  /** Default: defaultCacheDir(). Holds `downloads/<version>/` while assembling and `flink-<version>/`. */
  cacheDir?: string;
  /** A Python 3 with pip. Default: python3. */
  python?: string;
  log: Logger;
}

/** Thrown when the distribution cannot be assembled: the message is one line that says what to do. */
export class DistributionUnavailableError extends Error {
  readonly code = 'GW_EMBEDDED_UNAVAILABLE';
}

/** `$XDG_CACHE_HOME/flink-jar-gateway`, else `~/.cache/flink-jar-gateway`: reused by every later run. */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'flink-jar-gateway');
}

/** A marker written last into an assembled distribution (before the rename that publishes it). */
const COMPLETE = '.flink-jar-gateway-assembled';

/**
 * Extracts the members under `pyflink/` or `…/deps/` whose first directory is one of the wanted
 * ones, keeping the rest of the path. Zip entries lose their mode bits in Python's zipfile, so
 * scripts are made executable afterwards. Refuses members that would escape the target.
 */
const EXTRACT = `
import os, sys, tarfile, zipfile
dest, archive, wanted = sys.argv[1], sys.argv[2], set(sys.argv[3].split(','))
def target(name):
    parts = name.split('/')
    for anchor in ('pyflink', 'deps'):
        if anchor in parts:
            rest = parts[parts.index(anchor) + 1:]
            if len(rest) >= 2 and rest[0] in wanted and rest[-1] and '..' not in rest:
                return os.path.join(dest, *rest)
    return None
count = 0
def write(path, src):
    global count
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as out:
        while True:
            chunk = src.read(1 << 20)
            if not chunk: break
            out.write(chunk)
    if '/bin/' in path or path.endswith('.sh'): os.chmod(path, 0o755)
    count += 1
if archive.endswith('.whl') or archive.endswith('.zip'):
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            t = target(info.filename)
            if t and not info.is_dir():
                with z.open(info) as src: write(t, src)
else:
    with tarfile.open(archive) as tar:
        for m in tar:
            t = target(m.name)
            if t and m.isfile():
                with tar.extractfile(m) as src: write(t, src)
print(count)
`;

/** The assembled distribution for `version`, downloading and assembling it on first use. */
export function ensureFlinkDistribution(opts: DistributionOptions): string {
  if (!/^\d+\.\d+\.\d+$/.test(opts.version))
    throw new DistributionUnavailableError(`'${opts.version}' is not a Flink release version such as 2.1.3`);
  const cacheDir = opts.cacheDir ?? defaultCacheDir();
  const home = join(cacheDir, `flink-${opts.version}`);
  if (existsSync(join(home, COMPLETE))) return home;
  // Test files (and gateways) may want one version at once: one assembles, the others wait for it.
  const release = lockAssembly(cacheDir, opts.version, () => existsSync(join(home, COMPLETE)));
  if (!release) return home;
  try {
    return assemble(opts, cacheDir, home);
  } finally {
    release();
  }
}

function assemble(opts: DistributionOptions, cacheDir: string, home: string): string {
  const python = opts.python ?? 'python3';
  const log = opts.log.child({ component: 'flink-distribution', version: opts.version });
  const started = Date.now();
  const downloads = join(cacheDir, 'downloads', opts.version);
  mkdirSync(downloads, { recursive: true });
  log.info(
    { cacheDir },
    "downloading Flink's distribution from PyPI (apache-flink, apache-flink-libraries; about 300 MB, once per version)",
  );
  // pip skips files already in the directory, so an interrupted download resumes per file.
  // apache-flink's wheel is platform-tagged, but bin/ and conf/ are the same in every one:
  // pin one tag so that any local Python (or platform) can fetch it.
  const pip = (args: string[]) => {
    const r = spawnSync(
      python,
      ['-m', 'pip', 'download', '--no-deps', '--disable-pip-version-check', '--no-input', '-q', '-d', downloads, ...args],
      { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' },
    );
    if (r.error || r.status !== 0) {
      throw new DistributionUnavailableError(
        `pip download ${args.at(-1)} failed (${r.error?.message ?? `exit ${r.status}`}): ${lastLine(r.stderr)}; Flink ${opts.version} needs ${python} with pip and access to PyPI`,
      );
    }
  };
  pip([
    '--only-binary',
    ':all:',
    '--platform',
    'manylinux2014_x86_64',
    '--python-version',
    '3.11',
    '--implementation',
    'cp',
    `apache-flink==${opts.version}`,
  ]);
  pip([`apache-flink-libraries==${opts.version}`]);
  const archives = readdirSync(downloads);
  const flink = archives.find((f) => f.startsWith(`apache_flink-${opts.version}-`) && f.endsWith('.whl'));
  const libraries = archives.find((f) => f.startsWith(`apache_flink_libraries-${opts.version}`) && /\.(whl|tar\.gz)$/.test(f));
  if (!flink || !libraries)
    throw new DistributionUnavailableError(
      `PyPI's downloads for Flink ${opts.version} are incomplete in ${downloads} (found: ${archives.join(', ') || 'nothing'})`,
    );

  const staging = join(cacheDir, `.staging-flink-${opts.version}-${process.pid}-${Date.now()}`);
  try {
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(join(staging, 'log'), { recursive: true });
    const extract = (archive: string, wanted: string) => {
      const r = spawnSync(python, ['-c', EXTRACT, staging, join(downloads, archive), wanted], {
        stdio: ['ignore', 'pipe', 'pipe'],
        encoding: 'utf8',
      });
      if (r.status !== 0 || Number(r.stdout.trim()) === 0)
        throw new DistributionUnavailableError(`extracting ${archive} failed: ${lastLine(r.stderr) || 'no files matched'}`);
    };
    extract(flink, 'bin,conf');
    extract(libraries, 'bin,lib,opt,plugins');
    for (const need of [join('bin', 'jobmanager.sh'), join('bin', 'bash-java-utils.jar'), join('conf', 'config.yaml')]) {
      if (!existsSync(join(staging, need))) throw new DistributionUnavailableError(`the assembled Flink ${opts.version} has no ${need}`);
    }
    if (!readdirSync(join(staging, 'lib')).some((f) => f === `flink-dist-${opts.version}.jar`))
      throw new DistributionUnavailableError(`the assembled Flink ${opts.version} has no lib/flink-dist-${opts.version}.jar`);
    writeFileSync(join(staging, COMPLETE), `${new Date().toISOString()} ${flink} ${libraries}\n`);
    try {
      renameSync(staging, home);
    } catch (err) {
      // Another process published the same version first: use theirs.
      if (!existsSync(join(home, COMPLETE))) throw err;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  // The assembled directory is the cache; the archives (another 300 MB) are not needed again.
  rmSync(downloads, { recursive: true, force: true });
  log.info({ home, ms: Date.now() - started }, 'Flink distribution assembled');
  return home;
}

/**
 * Takes the assembly lock of `version` (a directory created atomically, holding its owner's pid).
 * Returns its release, or undefined once `done()` says another process assembled it meanwhile. A
 * lock whose owner is gone (a killed run) is taken over.
 */
function lockAssembly(cacheDir: string, version: string, done: () => boolean): (() => void) | undefined {
  mkdirSync(cacheDir, { recursive: true });
  const lock = join(cacheDir, `.assembling-flink-${version}`);
  const wait = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      return () => rmSync(lock, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (done()) return undefined;
    if (!lockOwnerAlive(lock)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    Atomics.wait(wait, 0, 0, 1000);
  }
}

function lockOwnerAlive(lock: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(lock, 'pid'), 'utf8'));
  } catch {
    // Just created, pid not written yet (or a crash in between: stale after a minute).
    try {
      return Date.now() - statSync(lock).mtimeMs < 60_000;
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The version of a distribution directory (a user's own, too), read from lib/flink-dist-<version>.jar. */
export function flinkDistributionVersion(home: string): string {
  const lib = join(home, 'lib');
  const dist = existsSync(lib)
    ? readdirSync(lib)
        .map((f) => /^flink-dist(?:_[\d.]+)?-(\d+\.\d+[^/]*)\.jar$/.exec(f)?.[1])
        .find(Boolean)
    : undefined;
  if (!dist || !existsSync(join(home, 'bin', 'jobmanager.sh'))) {
    throw new DistributionUnavailableError(
      `${home} is not a Flink distribution (it needs bin/jobmanager.sh and lib/flink-dist-<version>.jar)`,
    );
  }
  return dist;
}

function lastLine(text: string | null | undefined): string {
  return (text ?? '').trim().split('\n').filter(Boolean).at(-1) ?? '';
}
