import type { Readable } from 'node:stream';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import {
  BulkHttpClient,
  discardBody,
  fetchError,
  redactUri,
  type BulkResponse,
  type FileSystem,
  type ObjectStat,
  type OpenOptions,
  type OpenedObject,
  type PluginContext,
} from '../../src/plugin-kit';
import { GcsCredentials, type AuthHeaders } from './credentials';
import { abortReason, errorReason, translateAuthError, translateStatus, translateTransportError } from './errors';
import { parseGcsUri, type GcsLocation } from './gcs-uri';
import { setting } from './options';

/** Cloud Storage's JSON API, where credentials go unless fs.gs.storage.root.url says otherwise. */
export const DEFAULT_ROOT_URL = 'https://storage.googleapis.com/';
/** A black-holed endpoint fails in 10 s; a body or an answer that stalls, after 60 s. */
const CONNECT_TIMEOUT_MS = 10_000;
const READ_TIMEOUT_MS = 60_000;
/** Object metadata and error bodies are small; anything larger is not Cloud Storage's answer. */
const MAX_TEXT_BODY = 256 * 1024;

/** The fields of an object resource (JSON API) the plugin reads. */
interface ObjectResource {
  size?: string;
  etag?: string;
  generation?: string;
  updated?: string;
  md5Hash?: string;
  contentEncoding?: string;
}

type Headers = Record<string, string | string[]>;

/**
 * Reads gs://bucket/object through Cloud Storage's JSON API: `stat` is the object's metadata,
 * `open` its media (`alt=media`), ranged and pinned to the generation `stat` saw
 * (`ifGenerationMatch`, and the answer's `x-goog-generation` held to it, for stores that ignore the
 * condition). Requests go to the storage root URL only — a URI names a bucket, never a host — through
 * the plugin kit's bulk client (ADR 0035); the token comes from the SDK's credential (credentials.ts).
 */
export class GcsFileSystem implements FileSystem {
  readonly supportsRange = true;
  private readonly bulk: BulkHttpClient;
  private readonly credentials: GcsCredentials;
  private readonly root: URL;
  private readonly log: Logger;

  constructor(private readonly ctx: PluginContext) {
    this.bulk = new BulkHttpClient({
      guard: ctx.guard,
      ...(ctx.ca !== undefined ? { ca: ctx.ca } : {}),
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      readTimeoutMs: READ_TIMEOUT_MS,
    });
    this.credentials = new GcsCredentials(ctx.config, { guard: ctx.guard, ...(ctx.ca !== undefined ? { ca: ctx.ca } : {}) });
    this.root = new URL(setting(ctx.config, 'rootUrl')?.value ?? DEFAULT_ROOT_URL);
    this.log = ctx.log.child({ plugin: 'gcs' });
    this.log.debug(
      { root: redactUri(this.root), auth: this.credentials.kind, configKey: this.credentials.configKey },
      'gcs file system created',
    );
  }

  async stat(uri: URL, signal: AbortSignal): Promise<ObjectStat> {
    const location = this.prepare(uri, signal);
    const res = await this.send(uri, location, '', {}, signal);
    if (res.statusCode !== 200) throw translateStatus(uri, res.statusCode, errorReason(await readText(res.body)), false);
    let o: ObjectResource;
    try {
      o = JSON.parse(await readText(res.body)) as ObjectResource;
    } catch (err) {
      throw translateTransportError(err, uri, signal);
    }
    refuseTranscoded(uri, o.contentEncoding);
    const stat: ObjectStat = { pinnedRanges: true };
    const size = Number(o.size);
    if (o.size !== undefined && Number.isSafeInteger(size) && size >= 0) stat.size = size;
    if (o.etag) stat.etag = o.etag;
    if (o.generation && /^\d{1,20}$/.test(o.generation)) stat.version = o.generation;
    const updated = Date.parse(o.updated ?? '');
    if (Number.isFinite(updated)) stat.lastModified = updated;
    // The stored MD5 checks the whole object however it is read (composite objects have none: only a CRC32C).
    const md5 = hexOf(o.md5Hash, 16);
    if (md5 !== undefined) stat.integrity = { algorithm: 'md5', expected: md5 };
    return stat;
  }

  async open(uri: URL, options: OpenOptions): Promise<OpenedObject> {
    const { signal, range, pin } = options;
    if (range && (range.start < 0 || range.end < range.start)) throw fetchError.invalid(uri, `bad byte range ${range.start}-${range.end}`);
    const location = this.prepare(uri, signal);
    // The generation pins by itself: Cloud Storage answers 412 when the live object has another one.
    const query = `alt=media${pin?.version !== undefined ? `&ifGenerationMatch=${encodeURIComponent(pin.version)}` : ''}`;
    const res = await this.send(uri, location, query, range ? { range: `bytes=${range.start}-${range.end}` } : {}, signal);
    const { statusCode: status, headers } = res;
    const pinned = pin?.version !== undefined || pin?.etag !== undefined;
    if (status !== 200 && status !== 206) throw translateStatus(uri, status, errorReason(await readText(res.body)), pinned);
    if (range !== undefined ? status !== 206 : status === 206) {
      await discardBody(res.body);
      throw fetchError.unavailable(uri, `HTTP ${status} ${range ? 'without the requested byte range' : 'to a request without Range'}`);
    }
    try {
      refuseTranscoded(uri, header(headers, 'content-encoding'));
    } catch (err) {
      await discardBody(res.body);
      throw err;
    }
    const stat = statOfHeaders(headers);
    // A store that ignores the precondition still names the generation it sent: hold it to the pin.
    if (
      (pin?.version !== undefined && stat.version !== pin.version) ||
      (pin?.version === undefined && pin?.etag !== undefined && stat.etag !== pin.etag)
    ) {
      await discardBody(res.body);
      throw fetchError.changed(uri, 'Cloud Storage sent another generation than the one pinned');
    }
    if (range === undefined) {
      const md5 = hashOf(headers, 'md5');
      if (md5 !== undefined) stat.integrity = { algorithm: 'md5', expected: md5 };
    }
    return { stream: translateErrors(res.body, uri, signal), stat };
  }

  async close(): Promise<void> {
    await this.credentials.close();
    await this.bulk.close();
  }

  private prepare(uri: URL, signal: AbortSignal): GcsLocation {
    if (signal.aborted) throw abortReason(signal);
    const location = parseGcsUri(uri);
    // Node connects to IP literals without a lookup, so the bulk client's guarded lookup never sees them.
    if (isIP(this.root.hostname.replace(/^\[|\]$/g, '')))
      this.ctx.guard.checkHost(this.root.hostname, Number(this.root.port || (this.root.protocol === 'https:' ? 443 : 80)));
    return location;
  }

  /** One GET of the object's resource (`query` '' → metadata), authorised, to the root URL only. */
  private async send(uri: URL, location: GcsLocation, query: string, extra: AuthHeaders, signal: AbortSignal): Promise<BulkResponse> {
    // Checked before a token is asked for: a token that could not be used is not obtained either.
    if (this.credentials.kind !== 'UNAUTHENTICATED' && this.root.protocol !== 'https:') {
      throw fetchError.denied(
        uri,
        'gcs',
        `a Google access token is only sent over https (fs.gs.storage.root.url is ${redactUri(this.root)}); use https, or fs.gs.auth.type UNAUTHENTICATED for an emulator`,
      );
    }
    let auth: AuthHeaders;
    try {
      auth = await this.credentials.headers();
    } catch (err) {
      throw translateAuthError(err, uri, signal);
    }
    const base = this.root.pathname.replace(/\/+$/, '');
    const path = `${base}/storage/v1/b/${encodeURIComponent(location.bucket)}/o/${encodeURIComponent(location.object)}${query ? `?${query}` : ''}`;
    try {
      return await this.bulk.request({
        origin: new URL(this.root.origin),
        path,
        method: 'GET',
        headers: { ...auth, ...extra, 'user-agent': 'flink-jar-gateway' },
        signal,
      });
    } catch (err) {
      throw translateTransportError(err, uri, signal);
    }
  }
}

/**
 * Cloud Storage serves an object stored with Content-Encoding: gzip decompressed, ignoring Range,
 * so neither its size nor its MD5 would describe the bytes read: such a jar is refused, by name.
 */
function refuseTranscoded(uri: URL, encoding: string | undefined): void {
  if (encoding !== undefined && /gzip/i.test(encoding)) {
    throw fetchError.invalid(
      uri,
      'the object is stored with Content-Encoding: gzip, which Cloud Storage transcodes; upload the jar without a Content-Encoding',
    );
  }
}

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A base64 digest of `bytes` bytes as hex; undefined when absent or malformed. */
function hexOf(b64: string | undefined, bytes: number): string | undefined {
  if (b64 === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return undefined;
  const raw = Buffer.from(b64, 'base64');
  return raw.length === bytes ? raw.toString('hex') : undefined;
}

/** One digest from `x-goog-hash: crc32c=…, md5=…` (it may also come as two fields). */
function hashOf(headers: Headers, algorithm: 'md5'): string | undefined {
  const raw = headers['x-goog-hash'];
  const text = Array.isArray(raw) ? raw.join(',') : (raw ?? '');
  for (const part of text.split(',')) {
    const [name, ...rest] = part.trim().split('=');
    if (name?.toLowerCase() === algorithm) return hexOf(rest.join('='), 16);
  }
  return undefined;
}

function statOfHeaders(headers: Headers): ObjectStat {
  const stat: ObjectStat = {};
  const total =
    /\/(\d+)\s*$/.exec(header(headers, 'content-range') ?? '')?.[1] ??
    header(headers, 'x-goog-stored-content-length') ??
    header(headers, 'content-length');
  const size = Number(total);
  if (total !== undefined && Number.isSafeInteger(size) && size >= 0) stat.size = size;
  const etag = header(headers, 'etag')?.replace(/^(?:W\/)?"|"$/g, '');
  if (etag) stat.etag = etag;
  const generation = header(headers, 'x-goog-generation');
  if (generation && /^\d{1,20}$/.test(generation)) stat.version = generation;
  const lastModified = Date.parse(header(headers, 'last-modified') ?? '');
  if (Number.isFinite(lastModified)) stat.lastModified = lastModified;
  return stat;
}

async function readText(body: Readable): Promise<string> {
  let text = '';
  try {
    for await (const chunk of body) {
      text += String(chunk);
      if (text.length > MAX_TEXT_BODY) break; // leaving the loop destroys the body
    }
  } catch {
    // A body cut short has no reason; the status decides.
  }
  return text;
}

/**
 * The bulk client's own body stream, without a copy: its errors (a reset, a read timeout) are
 * translated on their way into `destroy`, so `errored`, 'error' and pipeline() carry gateway errors;
 * the caller's abort reaches the stream through the client, which destroys it with the reason.
 */
function translateErrors(body: Readable, uri: URL, signal: AbortSignal): Readable {
  const destroy = body.destroy.bind(body);
  body.destroy = (err?: Error) => destroy(err === undefined || err === null ? err : translateTransportError(err, uri, signal));
  return body;
}
