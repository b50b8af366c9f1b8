import type * as GoogleAuthLibrary from 'google-auth-library';
import { Agent, fetch as undiciFetch } from 'undici';
import { guardedConnector, type Configuration, type ConnectGuard } from '../../src/plugin-kit';
import { authType, readCredentialsFile, setting, type GcsAuthType } from './options';

/** The gateway only reads objects: its tokens are asked for Cloud Storage's read-only scope. */
export const READ_ONLY_SCOPES = ['https://www.googleapis.com/auth/devstorage.read_only'];

/** Where google-auth-library sends every service-account token request, whatever the key file says. */
export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';

/**
 * google-auth-library, loaded on the first gs:// read that needs a token: it is a large module tree,
 * and a gateway that never reads gs:// should not pay for it at start-up.
 */
function googleAuthLibrary(): typeof GoogleAuthLibrary {
  return require('google-auth-library') as typeof GoogleAuthLibrary;
}

/** The request headers that authorise a read, or none (UNAUTHENTICATED). */
export type AuthHeaders = Record<string, string>;

/** The part of google-auth-library's client the plugin uses (its type is the SDK's, not exported by it). */
interface AuthClientLike {
  getRequestHeaders(url?: string): Promise<Headers | Record<string, string>>;
  transporter?: {
    interceptors?: { request: { add(i: { resolved?: (o: GaxiosOptionsLike) => Promise<GaxiosOptionsLike> | GaxiosOptionsLike }): void } };
  };
}
interface GaxiosOptionsLike {
  url?: string | URL;
  fetchImplementation?: unknown;
}

/** Token requests that hear nothing fail in 10 s (the SDK retries them). */
const TOKEN_CONNECT_TIMEOUT_MS = 10_000;

export interface GcsCredentialDeps {
  guard: ConnectGuard;
  ca?: string;
}

/**
 * The cluster's Google credential for every gs:// read, from the GCS connector's keys (options.ts):
 * a service-account key file, an external-account (workload identity federation) file, Application
 * Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, then the metadata server: GKE Workload
 * Identity, Compute Engine) or none. google-auth-library (the SDK's credential layer) builds the
 * credential and caches and renews its token; this class gives its token requests the plugin's network
 * rules — every connection through the restricted-host guard with the CA bundle trusted — and sends a
 * key file's signed assertion to the configured token endpoint. The metadata server (ADC, COMPUTE_ENGINE)
 * is the node's own link-local endpoint, reached by the SDK without the guard, as Azure's managed identity is.
 */
export class GcsCredentials {
  readonly kind: GcsAuthType;
  /** The option that chose the credential (for logs and messages), never a secret. */
  readonly configKey: string | undefined;
  private client: Promise<AuthClientLike> | undefined;
  /** Every token request's connections: the restricted-host guard, the CA bundle (plugin kit). */
  private readonly dispatcher: Agent;

  constructor(
    private readonly config: Configuration,
    deps: GcsCredentialDeps,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {
    this.kind = authType(config);
    this.dispatcher = new Agent({ connect: guardedConnector(deps.guard, { ca: deps.ca, timeoutMs: TOKEN_CONNECT_TIMEOUT_MS }) });
    this.configKey = (
      setting(config, 'authType') ?? (this.kind === 'SERVICE_ACCOUNT_JSON_KEYFILE' ? setting(config, 'keyFile') : undefined)
    )?.key;
  }

  /** The headers for one request; the SDK caches the token and renews it before it expires. */
  async headers(): Promise<AuthHeaders> {
    if (this.kind === 'UNAUTHENTICATED') return {};
    if (this.kind === 'COMPUTE_ENGINE' && this.env.GOOGLE_APPLICATION_CREDENTIALS) {
      // ADC would take the file first: fetching with other credentials than the configured ones is worse than failing.
      throw Object.assign(
        new Error(
          'fs.gs.auth.type is COMPUTE_ENGINE, but GOOGLE_APPLICATION_CREDENTIALS is set and Application Default Credentials would use that file; unset it or use APPLICATION_DEFAULT',
        ),
        { code: 'GCS_AUTH_CONFLICT' },
      );
    }
    this.client ??= this.build().catch((err: unknown) => {
      this.client = undefined; // a key file fixed on disk is read again on the next fetch
      throw err;
    });
    const h = await (await this.client).getRequestHeaders();
    const out: AuthHeaders = {};
    const entries =
      typeof (h as Headers).forEach === 'function' && typeof (h as Headers).get === 'function'
        ? [...(h as Headers).entries()]
        : Object.entries(h);
    for (const [name, value] of entries) if (/^(authorization|x-goog-user-project)$/i.test(name)) out[name.toLowerCase()] = String(value);
    return out;
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private async build(): Promise<AuthClientLike> {
    const projectId = setting(this.config, 'projectId')?.value;
    let tokenUrl = setting(this.config, 'tokenServerUrl')?.value;
    const { GoogleAuth, JWT } = googleAuthLibrary();
    let client: AuthClientLike;
    if (this.kind === 'SERVICE_ACCOUNT_JSON_KEYFILE') {
      const key = readCredentialsFile(setting(this.config, 'keyFile')!.value);
      // The Java connector sends the assertion to the key's token_uri; google-auth-library always to Google's.
      tokenUrl ??= key.token_uri;
      const keyId = typeof key.private_key_id === 'string' ? key.private_key_id : undefined;
      client = new JWT({
        email: key.client_email,
        key: key.private_key,
        scopes: READ_ONLY_SCOPES,
        ...(keyId !== undefined ? { keyId } : {}),
      }) as unknown as AuthClientLike;
    } else {
      // ADC reads GOOGLE_APPLICATION_CREDENTIALS itself; a service-account key there sends its assertion to its token_uri, as in Java.
      if (this.kind === 'APPLICATION_DEFAULT' && this.env.GOOGLE_APPLICATION_CREDENTIALS)
        tokenUrl ??= adcTokenUri(this.env.GOOGLE_APPLICATION_CREDENTIALS);
      client = (await new GoogleAuth({
        scopes: READ_ONLY_SCOPES,
        ...(projectId !== undefined ? { projectId } : {}),
      }).getClient()) as unknown as AuthClientLike;
    }
    const target = tokenUrl !== undefined && tokenUrl !== GOOGLE_TOKEN_URL ? new URL(tokenUrl) : undefined;
    // gaxios would fetch through node-fetch with an agent of its choosing (a proxy from HTTPS_PROXY
    // bypasses any guard); every token request goes through the guarded dispatcher instead.
    const fetchImplementation = (input: unknown, init: Record<string, unknown>) =>
      undiciFetch(String(input), { ...init, dispatcher: this.dispatcher } as Parameters<typeof undiciFetch>[1]);
    client.transporter?.interceptors?.request.add({
      resolved: (opts) => {
        const url = new URL(String(opts.url));
        // In place: gaxios keeps using this object (its headers, and its error redaction reads a URL).
        opts.url = target !== undefined && url.href === GOOGLE_TOKEN_URL ? target : url;
        opts.fetchImplementation = fetchImplementation;
        return opts;
      },
    });
    return client;
  }
}

/** The token_uri of the service-account key ADC will read from GOOGLE_APPLICATION_CREDENTIALS, if it is one. */
function adcTokenUri(path: string): string | undefined {
  try {
    return readCredentialsFile(path).token_uri;
  } catch {
    return undefined; // not a service-account key: ADC decides what it is, and says so if it cannot use it
  }
}
