import {
  type BulkHttpClient,
  GatewayError,
  discardBody,
  fetchError,
  gatewayVersion,
  isGatewayError,
  redactUri,
  type ConnectGuard,
  type FileSystem,
  type ObjectStat,
  type OpenOptions,
  type OpenedObject,
} from '../../src/plugin-kit';
import { isIP } from 'node:net';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { request, type Dispatcher } from 'undici';
import { statusError, translateError } from './http-errors';

const USER_AGENT = `flink-jar-gateway/${gatewayVersion()}`;

export interface HttpSettings {
  rawHttpEnabled: boolean;
  /** Lower-cased header names; sent only to the jar URI's own origin. */
  headers: Record<string, string>;
  /** host or host:port entries (lower case) the headers may be sent to. */
  headerHosts: string[];
  maxRedirects: number;
  connectTimeoutMs: number;
  readTimeoutMs: number;
}

export interface HttpFileSystemDeps {
  /** undici, for requests through a proxy (CONNECT tunnels and NO_PROXY rules are undici's). */
  dispatcher: Dispatcher;
  /** Direct connections (no proxy configured): the bulk client, which reads bodies with far less CPU per byte. */
  bulk?: BulkHttpClient;
  guard: ConnectGuard;
  settings: HttpSettings;
  log: Logger;
  /**
   * A proxy is configured: sockets go to the proxy, which resolves the target itself, so every hop's
   * host name is resolved here first and checked by the guard. (The proxy may resolve it to another
   * address later; a guard that must hold against DNS rebinding needs the proxy's own policy too.)
   */
  checkTargetsBeforeProxy: boolean;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
type Method = 'GET' | 'HEAD';

/** A response as either transport gives it: status, lower-case headers, the unread body. */
interface HttpResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
}

/**
 * HTTP(S) downloads with undici: `stat` = HEAD (or a one-byte ranged GET where HEAD is refused),
 * `open` = GET with optional `Range`. Redirects are followed here rather than by undici's
 * interceptor so that every hop passes the scheme check and the restricted-host guard, and so that
 * the configured headers reach only the original origin.
 */
export class HttpFileSystem implements FileSystem {
  readonly supportsRange = true;

  constructor(private readonly deps: HttpFileSystemDeps) {}

  async stat(uri: URL, signal: AbortSignal): Promise<ObjectStat> {
    const head = await this.send(uri, 'HEAD', {}, signal);
    await discard(head);
    if (head.statusCode === 405 || head.statusCode === 501 || head.statusCode === 403) {
      // Some servers refuse HEAD (405, 501); URLs signed for GET only (S3 presigned, GCS signed)
      // answer it 403, because the method is part of what was signed. The ranged GET decides.
      const get = await this.send(uri, 'GET', { range: 'bytes=0-0' }, signal);
      await discard(get);
      if (get.statusCode !== 200 && get.statusCode !== 206) throw statusError(uri, get.statusCode);
      return statOf(get);
    }
    if (head.statusCode < 200 || head.statusCode > 299) throw statusError(uri, head.statusCode);
    return statOf(head);
  }

  async open(uri: URL, options: OpenOptions): Promise<OpenedObject> {
    const { signal, range, pin } = options;
    const extra: Record<string, string> = range ? { range: `bytes=${range.start}-${range.end}` } : {};
    // Only a strong ETag pins a range (RFC 9110 §13.1.1: If-Match compares strongly).
    if (pin?.etag !== undefined) extra['if-match'] = `"${pin.etag}"`;
    const res = await this.send(uri, 'GET', extra, signal);
    const status = res.statusCode;
    if (status === 412 && pin !== undefined) {
      await discard(res);
      throw fetchError.changed(uri, 'HTTP 412 to If-Match: the ETag changed');
    }
    if (status < 200 || status > 299) {
      await discard(res);
      throw statusError(uri, status);
    }
    if (range !== undefined) {
      const served = contentRange(res.headers['content-range']);
      if (status !== 206 || served?.start !== range.start) {
        await discard(res);
        throw fetchError.unavailable(uri, `HTTP ${status} without the requested byte range`);
      }
    } else if (status === 206) {
      await discard(res);
      throw fetchError.unavailable(uri, 'HTTP 206 to a request without Range');
    }
    const stat = statOf(res);
    // An origin that ignores If-Match still names what it sent.
    if (pin?.etag !== undefined && stat.etag !== undefined && stat.etag !== pin.etag) {
      await discard(res);
      throw fetchError.changed(uri, 'the origin sent another ETag than the one asked for with If-Match');
    }
    return { stream: this.wrapBody(uri, res.body, signal), stat };
  }

  async close(): Promise<void> {
    await Promise.all([this.deps.dispatcher.close(), this.deps.bulk?.close()]);
  }

  /** One request and its redirects; returns the first non-redirect response, body unread. */
  private async send(uri: URL, method: Method, extra: Record<string, string>, signal: AbortSignal): Promise<HttpResponse> {
    const { settings, log } = this.deps;
    let current = uri;
    for (let redirects = 0; ; redirects++) {
      await this.checkTarget(uri, current, signal);
      // Credentials configured for the jar URI go to its origin only, never to where it redirects.
      // Some artifact repositories refuse requests without a User-Agent; a configured one wins.
      const headers: Record<string, string> = {
        ...(current.origin === uri.origin && headersAllowed(uri, settings.headerHosts) ? settings.headers : {}),
        ...extra,
      };
      if (!Object.keys(headers).some((k) => k.toLowerCase() === 'user-agent')) headers['user-agent'] = USER_AGENT;
      let res: HttpResponse;
      try {
        const { bulk, dispatcher } = this.deps;
        res =
          bulk !== undefined
            ? await bulk.request({ origin: new URL(current.origin), path: `${current.pathname}${current.search}`, method, headers, signal })
            : await request(current, { dispatcher, method, headers, signal });
      } catch (err) {
        throw this.translate(uri, err, signal);
      }
      if (!REDIRECTS.has(res.statusCode)) return res;
      await discard(res);
      const location = first(res.headers.location);
      if (location === undefined || location === '') {
        throw fetchError.unavailable(uri, `HTTP ${res.statusCode} redirect without a Location header`);
      }
      if (redirects >= settings.maxRedirects) {
        throw fetchError.invalid(uri, `it redirects more than ${settings.maxRedirects} times (gateway.artifacts.http.max-redirects)`);
      }
      let next: URL;
      try {
        next = new URL(location, current);
      } catch {
        throw fetchError.unavailable(uri, `HTTP ${res.statusCode} redirect to an unparseable Location`);
      }
      log.debug({ uri: redactUri(uri), status: res.statusCode, location: redactUri(next) }, 'following redirect');
      current = next;
    }
  }

  /** Scheme, credentials-in-URI and restricted-host checks, for the jar URI and every redirect target. */
  private async checkTarget(uri: URL, target: URL, signal: AbortSignal): Promise<void> {
    const { settings, guard } = this.deps;
    const isRedirect = target !== uri;
    if (isRedirect) guard.checkRedirect?.(uri, target);
    const scheme = target.protocol.slice(0, -1);
    if (scheme !== 'https' && !(scheme === 'http' && settings.rawHttpEnabled)) {
      const hint =
        scheme === 'http'
          ? `${isRedirect ? `${redactUri(uri)} redirected to plain http; ` : ''}set user.artifacts.raw-http-enabled: true to allow plain http`
          : `${redactUri(uri)} redirected to it; the HTTP plugin follows redirects to https${settings.rawHttpEnabled ? ' and http' : ''} only`;
      throw new GatewayError('GW_FETCH_SCHEME_UNSUPPORTED', {
        scheme,
        uri: redactUri(target),
        schemes: settings.rawHttpEnabled ? 'https, http' : 'https',
        hint,
      });
    }
    if (target.username !== '' || target.password !== '') {
      throw fetchError.invalid(
        target,
        'credentials in the URI are not sent; put them in user.artifacts.http-headers (for example Authorization:Basic <base64>)',
      );
    }
    const port = Number(target.port) || (scheme === 'https' ? 443 : 80);
    guard.checkHost(target.hostname, port); // IP literals; names are checked when they are resolved
    const host = target.hostname.replace(/^\[|\]$/g, '');
    if (this.deps.checkTargetsBeforeProxy && isIP(host) === 0) await this.resolveThroughGuard(uri, host, port, signal);
  }

  private resolveThroughGuard(uri: URL, host: string, port: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      signal.throwIfAborted();
      this.deps.guard.lookupFor(port)(host, { all: true }, (err) => {
        if (!err) return resolve();
        if (isGatewayError(err)) return reject(err);
        // The target cannot be checked here. Fail closed while the guard is on; when it is off the proxy
        // may well be the only resolver (a common corporate set-up), so let it try.
        if (!this.deps.guard.enabled) return resolve();
        reject(
          fetchError.unavailable(
            uri,
            `cannot resolve ${host} to check it against gateway.artifacts.disallow-restricted-hosts (${err.code ?? 'lookup failed'})`,
          ),
        );
      });
    });
  }

  /**
   * The response body as the transport gives it, with no extra stream hop (a PassThrough here cost a
   * Transform pass per 64 KiB chunk): the transport destroys the body with its own errors (reset, read
   * timeout) and with the abort reason when `signal` aborts; each is translated on its way into
   * `destroy`, so that `errored`, the 'error' event and pipeline() all carry the gateway error.
   * Destroying the stream (consumer gone, size limit hit) aborts the request and frees the connection.
   */
  private wrapBody(uri: URL, body: Readable, signal: AbortSignal): Readable {
    const destroy = body.destroy.bind(body);
    body.destroy = (err?: Error) => destroy(err === undefined || err === null ? err : (this.translate(uri, err, signal) as Error));
    return body;
  }

  private translate(uri: URL, err: unknown, signal: AbortSignal): unknown {
    const { connectTimeoutMs, readTimeoutMs } = this.deps.settings;
    return translateError(err, { uri, signal, connectTimeoutMs, readTimeoutMs });
  }
}

/** Reads and drops a body we do not use, so the connection can be reused (or is closed if it is large). */
function discard(res: HttpResponse): Promise<void> {
  return discardBody(res.body);
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function contentRange(value: string | string[] | undefined): { start: number; end: number; total?: number } | undefined {
  const m = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(first(value) ?? '');
  if (!m) return undefined;
  return { start: Number(m[1]), end: Number(m[2]), ...(m[3] === '*' ? {} : { total: Number(m[3]) }) };
}

function statOf(res: HttpResponse): ObjectStat {
  const stat: ObjectStat = {};
  const h = res.headers;
  const size = res.statusCode === 206 ? contentRange(h['content-range'])?.total : Number(first(h['content-length']) ?? NaN);
  if (size !== undefined && Number.isSafeInteger(size) && size >= 0) stat.size = size;
  const etag = first(h.etag)
    ?.trim()
    .replace(/^W\//, '')
    .replace(/^"(.*)"$/, '$1');
  if (etag) stat.etag = etag;
  const lastModified = Date.parse(first(h['last-modified']) ?? '');
  if (Number.isFinite(lastModified)) stat.lastModified = lastModified;
  // Ranges can be pinned when the origin serves them (Accept-Ranges: bytes, or a 206) and names the
  // version with a strong ETag (a weak one may not be used with If-Match).
  const strongEtag = etag !== undefined && !/^\s*W\//.test(first(h.etag) ?? '');
  const ranges = res.statusCode === 206 || /(^|,)\s*bytes\s*($|,)/i.test(first(h['accept-ranges']) ?? '');
  if (strongEtag && ranges && stat.size !== undefined) stat.pinnedRanges = true;
  return stat;
}

/** The configured headers go only to listed hosts (host, or host:port with the URI's effective port). */
function headersAllowed(uri: URL, hosts: readonly string[]): boolean {
  const host = uri.hostname.toLowerCase().replace(/^\[|\]$/g, '');
  const port = uri.port || (uri.protocol === 'https:' ? '443' : '80');
  return hosts.some((h) => h === host || h === `${host}:${port}` || h === `[${host}]:${port}`);
}
