import { Agent as HttpsAgent } from 'node:https';
import type { TokenCredential } from '@azure/identity';
import {
  BlobServiceClient,
  type ContainerSASPermissions,
  SASProtocol,
  type StorageSharedKeyCredential,
  generateBlobSASQueryParameters,
  type StoragePipelineOptions,
  type UserDelegationKey,
} from '@azure/storage-blob';
import { displayUrl, trustedCa } from '../../src/plugin-kit';

/** Signs container SAS tokens for one validity window. */
export interface SasSigner {
  /**
   * Prepares one window (a user-delegation signer fetches its key here) and returns a function that
   * signs a container SAS, plus the time those SAS stop working.
   */
  open(startsOn: Date, expiresOn: Date): Promise<{ signContainer(container: string): string; expiresOn: Date }>;
  /** Aborts a key request in flight and releases connections. Idempotent. */
  close(): void;
}

interface Common {
  accountName: string;
  permissions: ContainerSASPermissions;
  /** https endpoint → https-only SAS */
  endpoint: URL;
}

function protocolFor(endpoint: URL): SASProtocol {
  return endpoint.protocol === 'https:' ? SASProtocol.Https : SASProtocol.HttpsAndHttp;
}

/** A service SAS signed locally with the account's shared key: no network call. */
export class AccountKeySasSigner implements SasSigner {
  constructor(
    private readonly c: Common,
    private readonly credential: StorageSharedKeyCredential,
  ) {}

  async open(startsOn: Date, expiresOn: Date): Promise<{ signContainer(container: string): string; expiresOn: Date }> {
    const protocol = protocolFor(this.c.endpoint);
    return {
      expiresOn,
      signContainer: (containerName) =>
        generateBlobSASQueryParameters(
          { containerName, permissions: this.c.permissions, startsOn, expiresOn, protocol },
          this.credential,
        ).toString(),
    };
  }

  close(): void {}
}

/**
 * A user-delegation SAS: the gateway's Microsoft Entra identity asks the account for a user
 * delegation key (`Get User Delegation Key`, bearer token, https only) valid for the window, and
 * signs with it. The SAS grants the intersection of its permissions and the identity's RBAC role,
 * and stops working when the key expires. No account key is needed.
 */
export class UserDelegationSasSigner implements SasSigner {
  private readonly service: BlobServiceClient;
  private readonly agent: HttpsAgent;
  private readonly controller = new AbortController();

  constructor(
    private readonly c: Common,
    credential: TokenCredential,
    ca: string | undefined,
  ) {
    this.agent = new HttpsAgent({ keepAlive: true, ...(ca === undefined ? {} : { ca: trustedCa(ca) }) });
    // `agent` is not in StoragePipelineOptions' type, but storage-blob hands these options to
    // core-client, which installs an agent policy for it (as fs-plugins/azure relies on too). One
    // try: the manager's backoff retries a failed cycle.
    const options: StoragePipelineOptions & { agent: HttpsAgent } = { retryOptions: { maxTries: 1 }, agent: this.agent };
    this.service = new BlobServiceClient(c.endpoint.href.replace(/\/+$/, ''), credential, options);
  }

  async open(startsOn: Date, expiresOn: Date): Promise<{ signContainer(container: string): string; expiresOn: Date }> {
    let key: UserDelegationKey;
    try {
      key = await this.service.getUserDelegationKey(startsOn, expiresOn, { abortSignal: this.controller.signal });
    } catch (err) {
      throw new Error(`Get User Delegation Key at ${displayUrl(this.c.endpoint)} failed: ${describe(err)}`);
    }
    const keyExpiry = key.signedExpiresOn;
    const sasExpiry = keyExpiry.getTime() < expiresOn.getTime() ? keyExpiry : expiresOn;
    const protocol = protocolFor(this.c.endpoint);
    return {
      expiresOn: sasExpiry,
      signContainer: (containerName) =>
        generateBlobSASQueryParameters(
          { containerName, permissions: this.c.permissions, startsOn, expiresOn: sasExpiry, protocol },
          key,
          this.c.accountName,
        ).toString(),
    };
  }

  close(): void {
    this.controller.abort();
    this.agent.destroy();
  }
}

/** An Azure SDK or identity error as a short message: status and service code, or the identity error's own text. */
function describe(err: unknown): string {
  const e = err as { name?: string; statusCode?: number; code?: string; message?: string };
  if (e.name === 'AbortError') return 'aborted (the provider was closed)';
  if (typeof e.statusCode === 'number') return `HTTP ${e.statusCode}${e.code ? ` ${e.code}` : ''}`;
  const text = `${e.name ?? 'Error'}: ${e.message ?? String(err)}`;
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
