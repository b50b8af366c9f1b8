import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { Logger } from 'pino';
import { trustedCa, type ConnectGuard } from '../../src/plugin-kit';
import { CONNECT_TIMEOUT_MS, READ_TIMEOUT_MS } from './timeouts';
import type { BucketTarget } from './bucket-settings';
import { buildCredentials, chainId } from './credentials';
import type { Sts } from './sts';

export interface ClientCacheDeps {
  guard: ConnectGuard;
  log: Logger;
  /** PEM CA bundle; undefined = system CAs. */
  ca?: string | undefined;
}

/** The port a request to `endpoint` (or to AWS, always https) connects to. */
export function endpointPort(endpoint: URL | undefined): number {
  if (!endpoint) return 443;
  if (endpoint.port) return Number(endpoint.port);
  return endpoint.protocol === 'http:' ? 80 : 443;
}

/**
 * One `S3Client` per distinct (endpoint, region, addressing, credentials): clients own connection
 * pools and credential caches, so buckets sharing all four share a client.
 */
export class S3ClientCache {
  private readonly clients = new Map<string, S3Client>();
  private readonly stsClients = new Set<Sts>();

  constructor(private readonly deps: ClientCacheDeps) {}

  get(target: BucketTarget): S3Client {
    const id = cacheKey(target);
    let client = this.clients.get(id);
    if (!client) {
      client = this.create(target);
      this.clients.set(id, client);
      this.deps.log.debug(
        {
          endpoint: target.endpoint?.origin ?? 'aws',
          region: target.region ?? '(default chain)',
          credentials: target.credentials.map(describe).join(', '),
        },
        's3 client created',
      );
    }
    return client;
  }

  close(): void {
    for (const client of this.clients.values()) client.destroy();
    this.clients.clear();
    for (const sts of this.stsClients) void sts.close();
    this.stsClients.clear();
  }

  private create(target: BucketTarget): S3Client {
    // The guard runs inside the socket's DNS lookup, so every resolved address is checked at
    // connect time (no check-then-connect race). IP-literal endpoints skip lookup; the file system
    // calls guard.checkHost for those before each request.
    const lookup = this.deps.guard.lookupFor(endpointPort(target.endpoint));
    const agentOptions = { keepAlive: true, maxSockets: 50, lookup };
    const config: S3ClientConfig = {
      forcePathStyle: target.forcePathStyle,
      // The gateway computes SHA-256 itself; the SDK's default response validation (CRC64NVME in
      // pure JS) would cost more CPU per byte than the rest of a GetObject.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      requestHandler: new NodeHttpHandler({
        httpAgent: new HttpAgent(agentOptions),
        // The bundle is trusted in addition to Node's store (a bare `ca` would replace it: AWS's own endpoints would fail).
        httpsAgent: new HttpsAgent(this.deps.ca !== undefined ? { ...agentOptions, ca: trustedCa(this.deps.ca) } : agentOptions),
        connectionTimeout: CONNECT_TIMEOUT_MS,
        socketTimeout: READ_TIMEOUT_MS,
      }),
    };
    if (target.endpoint) config.endpoint = target.endpoint.href.replace(/\/$/, '');
    // Without credential settings the SDK uses its default provider chain (env, SSO, web identity /
    // IRSA, profile files, process, ECS / EKS pod identity, EC2 metadata), refreshing what expires.
    const credentials = buildCredentials(target.credentials, target.sts, {
      guard: this.deps.guard,
      log: this.deps.log,
      stsClients: this.stsClients,
      ca: this.deps.ca,
    });
    // Hadoop's anonymous provider: requests go unsigned (public buckets).
    if (credentials === 'anonymous') config.signer = { sign: async (request) => request };
    else if (credentials !== undefined) config.credentials = credentials;
    // fs.s3a.connection.ssl.enabled: false for AWS S3 itself (an endpoint URL carries its own scheme).
    if (!target.endpoint && !target.tls) config.tls = false;
    config.region = target.region ?? defaultChainRegion();
    // AWS S3 answers 301 when the bucket lives in another region than the client signs for; follow
    // it (a self-hosted endpoint has one region, so a redirect there is a misconfiguration).
    if (!target.endpoint) config.followRegionRedirects = true;
    return new S3Client(config);
  }
}

/** The SDK's own region chain (AWS_REGION, profile files), falling back to us-east-1; read once per client. */
function defaultChainRegion(): () => Promise<string> {
  let region: Promise<string> | undefined;
  return () =>
    (region ??= (async () => {
      const probe = new S3Client({});
      try {
        return await probe.config.region();
      } catch {
        return 'us-east-1';
      } finally {
        probe.destroy();
      }
    })());
}

function cacheKey(t: BucketTarget): string {
  // The credentials only enter the key as a digest, so the cache key never holds a secret in the clear.
  return JSON.stringify([t.endpoint?.href ?? '', t.region ?? '', t.forcePathStyle, t.tls, chainId(t.credentials, t.sts)]);
}

/** A link of a chain for the log: its kind, and the role it assumes (no secret). */
function describe(source: BucketTarget['credentials'][number]): string {
  return source.kind === 'assumed-role'
    ? `assumed-role ${source.role.arn} (base: ${source.base.map(describe).join(', ') || 'none'})`
    : source.kind;
}
