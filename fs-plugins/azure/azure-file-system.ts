import type { Readable } from 'node:stream';
import { isIP } from 'node:net';
import {
  ContainerClient,
  newPipeline,
  type BlobClient,
  type IHttpClient,
  type Pipeline,
  type StoragePipelineOptions,
} from '@azure/storage-blob';
import type { TokenCredential } from '@azure/identity';
import type { Logger } from 'pino';
import {
  BulkHttpClient,
  fetchError,
  redactUri,
  type FileSystem,
  type ObjectStat,
  type OpenOptions,
  type OpenedObject,
  type PluginContext,
} from '../../src/plugin-kit';
import { defaultBlobEndpoint, isAzureStorageHost, parseAzureUri, type AzureBlobLocation } from './azure-uri';
import { lazyDefaultCredential, resolveAzureAuth, type AzureAuth } from './credentials';
import { translateAzureError, translateStreamError } from './errors';
import { bulkTransport } from './bulk-transport';
import { configuredEndpoint, configuredSecret } from './options';
import { oauthIdentity, type OAuthIdentity } from './oauth';

/**
 * Few, quick retries: the gateway retries transient fetch failures itself
 * (gateway.artifacts.fetch-retries), and the SDK's defaults (4 tries from 4 s) spend 16 s on a
 * refused connection. `tryTimeoutInMs` is sent to the service as its server-side timeout.
 */
const RETRY_OPTIONS = { maxTries: 3, retryDelayInMs: 200, maxRetryDelayInMs: 2000, tryTimeoutInMs: 60_000 };
/**
 * The SDK's resumption of a body that ended early (ranged, pinned to the first ETag). A dropped
 * connection is not resumed: Node reports it as `aborted`, which the SDK treats as final (see README).
 */
const MAX_STREAM_RETRIES = 3;
/** A black-holed endpoint fails in 10 s; a body or an answer that stalls, after 60 s. */
const CONNECT_TIMEOUT_MS = 10_000;
const READ_TIMEOUT_MS = 60_000;

interface Target {
  blob: BlobClient;
  location: AzureBlobLocation;
}

/** Reads blobs for wasbs/wasb/abfss/abfs URIs through the Blob service. See `azurePlugin`. */
export class AzureFileSystem implements FileSystem {
  readonly supportsRange = true;
  private readonly bulk: BulkHttpClient;
  private readonly transport: IHttpClient;
  private readonly pipelines = new Map<string, Pipeline>();
  private readonly defaultCredential: () => TokenCredential;
  /** One OAuth identity per account scope, so its tokens are cached across fetches. */
  private readonly oauth = new Map<string, OAuthIdentity>();
  private readonly log: Logger;

  constructor(
    private readonly ctx: PluginContext,
    defaultCredential: () => TokenCredential = lazyDefaultCredential(),
  ) {
    this.bulk = new BulkHttpClient({ guard: ctx.guard, ca: ctx.ca, connectTimeoutMs: CONNECT_TIMEOUT_MS, readTimeoutMs: READ_TIMEOUT_MS });
    this.transport = bulkTransport(this.bulk);
    this.defaultCredential = defaultCredential;
    this.log = ctx.log.child({ plugin: 'azure' });
  }

  async stat(uri: URL, signal: AbortSignal): Promise<ObjectStat> {
    try {
      const { blob } = this.target(uri);
      const p = await blob.getProperties({ abortSignal: signal });
      // Blob storage serves ranges of every blob; each is pinned by If-Match on the ETag (or the version).
      const stat: ObjectStat = { ...toStat(p.contentLength, p.etag, p.versionId, p.lastModified), pinnedRanges: true };
      // The stored Content-MD5 still checks the whole blob when it is read in ranges.
      if (p.contentMD5 && p.contentMD5.length === 16)
        stat.integrity = { algorithm: 'md5', expected: Buffer.from(p.contentMD5).toString('hex') };
      return stat;
    } catch (err) {
      throw translateAzureError(err, uri, signal);
    }
  }

  async open(uri: URL, options: OpenOptions): Promise<OpenedObject> {
    const { signal, range, pin } = options;
    let body: NodeJS.ReadableStream | undefined;
    let stat: ObjectStat;
    try {
      const { blob: current } = this.target(uri);
      const blob = pin?.version !== undefined ? current.withVersion(pin.version) : current;
      const count = range === undefined ? undefined : range.end - range.start + 1;
      const conditions = pin?.version === undefined && pin?.etag !== undefined ? { ifMatch: `"${pin.etag}"` } : undefined;
      const res = await blob.download(range?.start ?? 0, count, {
        abortSignal: signal,
        maxRetryRequests: MAX_STREAM_RETRIES,
        ...(conditions ? { conditions } : {}),
      });
      body = res.readableStreamBody;
      const total = totalFromContentRange(res.contentRange) ?? res.contentLength;
      stat = toStat(total, res.etag, res.versionId, res.lastModified);
      // A whole-blob read can be checked end to end against the Content-MD5 Azure stores with the blob.
      const md5 = range === undefined ? (res.blobContentMD5 ?? res.contentMD5) : undefined;
      if (md5 && md5.length === 16) stat.integrity = { algorithm: 'md5', expected: Buffer.from(md5).toString('hex') };
    } catch (err) {
      throw translateAzureError(err, uri, signal);
    }
    if (body === undefined) throw fetchError.unavailable(uri, 'the download response had no body');
    return { stream: this.guardStream(body as Readable, uri, signal), stat };
  }

  async close(): Promise<void> {
    await this.bulk.close();
  }

  /**
   * The SDK's body itself, with no extra stream hop (a PassThrough here cost a pass per chunk), made
   * to let no SDK error escape: the SDK ends its stream only through `destroy(err)` (a reset, a
   * resumption that gave up, its own AbortError), so errors are translated on their way into
   * `destroy`; the caller's abort destroys it with the caller's reason, untouched.
   */
  private guardStream(body: Readable, uri: URL, signal: AbortSignal): Readable {
    const destroy = body.destroy.bind(body);
    // Not `instanceof Error`: an AbortSignal's default reason is a DOMException, from another realm under jest.
    const reason = (): Error =>
      typeof signal.reason === 'object' && signal.reason !== null ? (signal.reason as Error) : new Error('aborted');
    body.destroy = (err?: Error) =>
      destroy(err === undefined || err === null ? err : signal.aborted ? reason() : translateStreamError(err, uri, signal));
    const onAbort = () => destroy(reason());
    if (signal.aborted) onAbort();
    else {
      signal.addEventListener('abort', onAbort, { once: true });
      body.once('close', () => signal.removeEventListener('abort', onAbort));
    }
    return body;
  }

  private target(uri: URL): Target {
    const location = parseAzureUri(uri);
    const endpoint = this.endpointFor(uri, location);
    const port = Number(endpoint.port || (endpoint.protocol === 'https:' ? 443 : 80));
    // IP-literal endpoints are checked before any request (Node connects to them without a lookup);
    // the bulk client checks every connection again, which also covers redirects.
    if (isIP(endpoint.hostname.replace(/^\[|\]$/g, ''))) this.ctx.guard.checkHost(endpoint.hostname, port);
    const auth = resolveAzureAuth(this.ctx.config, location, this.defaultCredential, (hosts) => this.oauthFor(hosts));
    if ((auth.kind === 'default-azure-credential' || auth.kind === 'oauth') && endpoint.protocol !== 'https:') {
      throw fetchError.denied(
        uri,
        'azure',
        `${auth.kind === 'oauth' ? 'the account uses OAuth' : 'no fs.azure.account.key or fs.azure.sas option for this container'}, and an Azure identity token is only sent over https (endpoint ${redactUri(endpoint)})`,
      );
    }
    const base = endpoint.href.replace(/\/+$/, '');
    const containerUrl = `${base}/${encodeURIComponent(location.container)}${auth.kind === 'sas' ? `?${auth.sas}` : ''}`;
    const container = new ContainerClient(containerUrl, this.pipeline(base, auth, location));
    return { blob: container.getBlobClient(location.blobName), location };
  }

  /**
   * Where requests for `location` go — and so where the cluster's Azure credentials go (account keys,
   * SAS, identity tokens): the account's configured `fs.azure.account.endpoint.<account>`, else the
   * URI's host when it is one of Azure Storage's own, or a host the administrator configured a key or
   * SAS for under its exact name. Any other host is refused before a connection is made: a URI names
   * what to fetch, never where the cluster's secrets may go.
   */
  private endpointFor(uri: URL, location: AzureBlobLocation): URL {
    const configured = configuredEndpoint(this.ctx.config, location.account);
    if (configured !== undefined) {
      if (!isAzureStorageHost(location.uriHost) && location.uriHost !== configured.hostname.toLowerCase()) {
        throw fetchError.invalid(
          uri,
          `the host '${location.uriHost}' is not an Azure Storage host of account '${location.account}' (${location.account}.blob.core.windows.net) ` +
            `nor the host of its fs.azure.account.endpoint.${location.account}`,
        );
      }
      return configured;
    }
    if (isAzureStorageHost(location.uriHost) || configuredSecret(this.ctx.config, [location.uriHost], location.container) !== undefined) {
      return defaultBlobEndpoint(location);
    }
    throw fetchError.invalid(
      uri,
      `'${location.uriHost}' is not an Azure Storage endpoint (<account>.blob.core.windows.net, <account>.dfs.core.windows.net or another Azure cloud's); ` +
        `the cluster's Azure credentials go only to Azure Storage, so for an emulator or private endpoint set fs.azure.account.endpoint.${location.account}`,
    );
  }

  private oauthFor(hosts: readonly string[]): OAuthIdentity {
    const id = hosts.join('|');
    let identity = this.oauth.get(id);
    if (identity === undefined) {
      identity = oauthIdentity(this.ctx.config, hosts, { guard: this.ctx.guard, ca: this.ctx.ca });
      this.oauth.set(id, identity);
      this.log.debug({ hosts, identity: identity.kind, configKey: identity.configKey }, 'azure oauth identity created');
    }
    return identity;
  }

  /** One pipeline per endpoint and credential, so connections and tokens are reused across fetches. */
  private pipeline(base: string, auth: AzureAuth, location: AzureBlobLocation): Pipeline {
    const id = `${base}|${auth.kind}|${auth.kind === 'default-azure-credential' ? '' : auth.configKey}|${auth.kind === 'oauth' ? location.uriHost : ''}`;
    let pipeline = this.pipelines.get(id);
    if (pipeline === undefined) {
      // The SDK signs and retries; the bulk client moves the bytes (bulk-transport.ts).
      const options: StoragePipelineOptions = {
        retryOptions: RETRY_OPTIONS,
        httpClient: this.transport,
        userAgentOptions: { userAgentPrefix: 'flink-jar-gateway' },
      };
      pipeline = newPipeline(auth.credential, options);
      this.pipelines.set(id, pipeline);
      this.log.debug(
        {
          account: location.account,
          endpoint: redactUri(base),
          auth: auth.kind,
          configKey: auth.kind === 'default-azure-credential' ? undefined : auth.configKey,
        },
        'azure pipeline created',
      );
    }
    return pipeline;
  }
}

function toStat(
  size: number | undefined,
  etag: string | undefined,
  version: string | undefined,
  lastModified: Date | undefined,
): ObjectStat {
  const stat: ObjectStat = {};
  if (size !== undefined) stat.size = size;
  if (etag !== undefined) stat.etag = etag.replace(/^(?:W\/)?"|"$/g, '');
  if (version !== undefined) stat.version = version;
  if (lastModified !== undefined) stat.lastModified = lastModified.getTime();
  return stat;
}

/** The object's total size from `bytes 2-5/1234`; undefined when absent or `*`. */
function totalFromContentRange(contentRange: string | undefined): number | undefined {
  const m = /\/(\d+)\s*$/.exec(contentRange ?? '');
  return m ? Number(m[1]) : undefined;
}
