import { realpathSync, type Stats } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import { isAbsolute, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import {
  GatewayError,
  fetchError,
  redactUri,
  type FileSystem,
  type ObjectStat,
  type OpenOptions,
  type OpenedObject,
} from '../../src/plugin-kit';

/** An allowed directory as configured and with its symbolic links resolved. */
export interface AllowedDir {
  configured: string;
  real: string;
}

const OUTSIDE = 'outside gateway.artifacts.local-file.allowed-dirs';

/**
 * `file://` jar URIs from the gateway's own disk, for development. Off unless enabled; then confined
 * to the allowed directories, checked on the real path, so neither `..` nor a symbolic link leads out.
 * There is no network, so the restricted-host guard has nothing to check.
 */
export class LocalFileSystem implements FileSystem {
  readonly supportsRange = true;

  /** `allowed` undefined = the plugin is disabled. */
  constructor(private readonly allowed: readonly AllowedDir[] | undefined) {}

  async stat(uri: URL, signal: AbortSignal): Promise<ObjectStat> {
    signal.throwIfAborted();
    const path = await this.resolve(uri);
    const handle = await open(path, 'r').catch((err: unknown) => Promise.reject(fsError(uri, err)));
    try {
      return statOf(uri, await handle.stat());
    } finally {
      await handle.close();
    }
  }

  async open(uri: URL, options: OpenOptions): Promise<OpenedObject> {
    const { signal, range } = options;
    signal.throwIfAborted();
    const path = await this.resolve(uri);
    // Stat the opened descriptor, not the path, so size and content belong to the same file.
    const handle = await open(path, 'r').catch((err: unknown) => Promise.reject(fsError(uri, err)));
    let stat: ObjectStat;
    try {
      stat = statOf(uri, await handle.stat());
      if (range !== undefined && (range.start > range.end || range.start >= (stat.size ?? 0))) {
        throw fetchError.unavailable(uri, `range ${range.start}-${range.end} is outside the file (${stat.size} bytes)`);
      }
    } catch (err) {
      await handle.close();
      throw err;
    }
    const stream = handle.createReadStream(range ? { start: range.start, end: range.end } : {});
    return { stream: abortable(stream, signal), stat };
  }

  async close(): Promise<void> {}

  private async resolve(uri: URL): Promise<string> {
    if (this.allowed === undefined) {
      throw new GatewayError('GW_FETCH_SCHEME_UNSUPPORTED', {
        scheme: 'file',
        uri: redactUri(uri),
        schemes: 'see gateway.artifacts.allowed-schemes',
        hint: 'file:// is for development only: set gateway.artifacts.local-file.enabled: true and list the directories in gateway.artifacts.local-file.allowed-dirs.',
      });
    }
    if (uri.protocol !== 'file:') throw fetchError.invalid(uri, 'the file plugin serves file:// URIs only');
    if (uri.hostname !== '' && uri.hostname !== 'localhost') {
      throw fetchError.invalid(uri, 'a file:// URI must not name another host (use file:///absolute/path)');
    }
    let path: string;
    try {
      path = resolve(fileURLToPath(uri));
    } catch {
      throw fetchError.invalid(uri, 'it is not a local file path (an encoded / is not allowed)');
    }
    // Refuse before touching the disk, so that paths outside cannot even be probed for existence...
    if (!this.allowed.some((d) => inside(path, d.configured) || inside(path, d.real))) throw fetchError.denied(uri, 'file', OUTSIDE);
    let real: string;
    try {
      real = await realpath(path);
    } catch (err) {
      throw fsError(uri, err);
    }
    // ...and again on the real path, which a symbolic link inside an allowed directory may move elsewhere.
    if (!this.allowed.some((d) => inside(real, d.real))) throw fetchError.denied(uri, 'file', OUTSIDE);
    return real;
  }
}

/** Resolves the configured directories once, at start; a relative or missing one is a configuration error. */
export function resolveAllowedDirs(dirs: readonly string[]): { dirs: AllowedDir[]; problems: string[] } {
  const out: AllowedDir[] = [];
  const problems: string[] = [];
  for (const dir of dirs) {
    if (!isAbsolute(dir)) {
      problems.push(`'${dir}' is not an absolute path`);
      continue;
    }
    try {
      out.push({ configured: resolve(dir), real: realpathSync(dir) });
    } catch (err) {
      problems.push(`'${dir}' cannot be resolved (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  return { dirs: out, problems };
}

function inside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);
}

function statOf(uri: URL, st: Stats): ObjectStat {
  if (!st.isFile()) throw fetchError.invalid(uri, 'it is not a regular file');
  // size and mtime stand in for an entity tag: enough for the cache to notice a rebuilt jar.
  return { size: st.size, lastModified: Math.floor(st.mtimeMs), etag: `${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}` };
}

function fsError(uri: URL, err: unknown): GatewayError {
  const code = (err as NodeJS.ErrnoException).code ?? 'error';
  if (code === 'ENOENT' || code === 'ENOTDIR') return fetchError.notFound(uri, code);
  if (code === 'EACCES' || code === 'EPERM') return fetchError.denied(uri, 'file', code);
  if (code === 'EISDIR') return fetchError.invalid(uri, 'it is not a regular file');
  return fetchError.unavailable(uri, code, err);
}

/** Destroys `stream` with the caller's abort reason, as the HTTP plugin's bodies do. */
function abortable(stream: Readable, signal: AbortSignal): Readable {
  const onAbort = () => stream.destroy(signal.reason as Error);
  signal.addEventListener('abort', onAbort, { once: true });
  stream.once('close', () => signal.removeEventListener('abort', onAbort));
  return stream;
}
