import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { ConfigRule, Configuration } from '../config/registry';
import type { OptionDef } from '../config/types';
import type { fetchError } from './fetch-error';
import type { ConnectGuard } from '../net/connect-guard';
import type { BuiltInTokenProvider } from './provider-support';

/**
 * The version of this contract (`FileSystem`, `PluginContext`, `FsPluginDefinition`). A third-party
 * plugin's manifest declares the version it was written against; a mismatch stops start-up.
 * Raised only for incompatible changes (a removed or re-typed member), not for additions.
 */
export const PLUGIN_CONTRACT_VERSION = 1;

/** Plugins see the restricted-host guard through this contract; it is defined with the connection primitives. */
export type { ConnectGuard };

/**
 * What a store says about an object before (or while) it is read. Every field is optional
 * because stores differ; the cache uses `version`, then `etag`, to decide whether a cached copy
 * is still current.
 */
export interface ObjectStat {
  /** Size in bytes, when the store reports it (used to refuse oversized jars before reading); undefined when it does not. */
  size?: number | undefined;
  /** The store's entity tag, without quotes. */
  etag?: string;
  /** An immutable version id (S3 `versionId`, Azure `versionId`), when the URI or the store has one. */
  version?: string;
  /** Last modification, epoch milliseconds. */
  lastModified?: number;
  /**
   * A checksum the store vouches for, verified end to end while streaming (e.g. the MD5 in a
   * single-part S3 ETag, an Azure Content-MD5, an S3 full-object CRC32 or SHA-256). Leave it out
   * when unsure: a wrong expectation fails good downloads. `sha256` is compared with the digest the
   * gateway computes anyway (free); `crc32` costs a seventh of `md5`'s CPU per byte.
   */
  integrity?: { algorithm: 'md5' | 'crc32' | 'sha256' /** hex */; expected: string };
  /**
   * The store serves byte ranges of this object and can pin each one to `version` or `etag` (a
   * strong validator): `open` with `range` and `pin` then returns exactly those bytes of exactly
   * that version, or fails with `GW_FETCH_CHANGED`. Lets the gateway read a large object with
   * several ranged requests at once. Leave it out when unsure (a weak or missing validator).
   */
  pinnedRanges?: boolean;
}

export interface OpenOptions {
  /** Aborts the read (fetch timeout, shutdown). Implementations must stop network I/O promptly. */
  signal: AbortSignal;
  /** Inclusive byte range, for plugins that declare `supportsRange`. */
  range?: { start: number; end: number };
  /**
   * Read only this version of the object (with `range`, from a `stat` that set `pinnedRanges`): send
   * a conditional request (`If-Match`, a `versionId`) and fail with `GW_FETCH_CHANGED`
   * (`fetchError.changed`) when the store holds another version or answers 412.
   */
  pin?: { etag?: string; version?: string };
}

export interface OpenedObject {
  stream: Readable;
  stat: ObjectStat;
}

/**
 * One filesystem (S3, Azure Blob, HTTP(S), ...). Implementations translate their SDK's errors into
 * gateway errors at this edge (`GW_FETCH_*` codes; see `fetchError`): no SDK error type escapes.
 * Messages name the URI without query string or userinfo (`redactUri`), never a credential.
 *
 * @example
 * const fs = plugin.create(ctx);
 * const { stream } = await fs.open(new URL('s3://team-a/app.jar'), { signal });
 */
export interface FileSystem {
  /** Metadata of the object; `GW_FETCH_NOT_FOUND` when it does not exist. */
  stat(uri: URL, signal: AbortSignal): Promise<ObjectStat>;
  /** Opens the object for streaming. The stream must be destroyed on `signal` abort. */
  open(uri: URL, options: OpenOptions): Promise<OpenedObject>;
  /** Whether `open` honours `range`. */
  readonly supportsRange: boolean;
  /** Releases pooled connections. */
  close(): Promise<void>;
}

export interface PluginContext {
  config: Configuration;
  log: Logger;
  guard: ConnectGuard;
  /** PEM CA bundle from `gateway.artifacts.ca-bundle`, for private endpoints; undefined = system CAs. */
  ca?: string | undefined;
  /**
   * Builds gateway errors (`GW_FETCH_NOT_FOUND`, `GW_FETCH_DENIED`, ...) with the URI redacted, for
   * plugins that cannot import the gateway's modules (third-party plugins in plain JavaScript).
   * The gateway always sets it; it is optional only so that contexts built by hand in tests of
   * built-in plugins (which import `fetchError` directly) need not.
   */
  errors?: typeof fetchError;
}

/**
 * A filesystem plugin: one folder under fs-plugins/, exporting one definition. It owns its SDK,
 * its option keys (declared in `options`, so the registry validates, documents and redacts them)
 * and its error translation.
 */
export interface FsPluginDefinition {
  name: string;
  /** Lower-case URI schemes this plugin serves, e.g. ['s3', 's3a', 's3p']. */
  schemes: readonly string[];
  options: readonly OptionDef[];
  /**
   * Rules across the plugin's options (a key pair, a mode that needs another key), evaluated by the
   * options registry with every other problem at start-up; `create` may then trust its options.
   */
  rules?: readonly ConfigRule[];
  create(ctx: PluginContext): FileSystem;
  /**
   * The plugin's delegation-token provider, if its store issues short-lived credentials per job
   * (S3 through STS, Azure Blob through SAS): the plugin owns its SDK, so it owns that provider too.
   * Its options join the registry with the plugin's.
   */
  tokenProvider?: BuiltInTokenProvider;
}
