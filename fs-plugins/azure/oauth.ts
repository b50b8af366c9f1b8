import { Agent as HttpsAgent } from 'node:https';
import { isIP } from 'node:net';
import {
  ClientSecretCredential,
  ManagedIdentityCredential,
  WorkloadIdentityCredential,
  type TokenCredential,
  type TokenCredentialOptions,
} from '@azure/identity';
import { trustedCa, type ConfigRule, type Configuration, type ConnectGuard, type OptionDef } from '../../src/plugin-kit';

const section = 'Azure Blob Storage (wasbs://, abfss://)';

/**
 * ABFS's OAuth settings (hadoop-azure), each global (`fs.azure.account.oauth2.client.id`) and per
 * account under the account's host (`fs.azure.account.oauth2.client.id.<account>.dfs.core.windows.net`,
 * the .blob. twin also read): the account's own key wins.
 */
const OAUTH_SETTINGS = {
  authType: {
    suffix: 'fs.azure.account.auth.type',
    sensitive: false,
    description:
      'How ABFS authenticates: SharedKey (the account key, default), SAS, or OAuth (then fs.azure.account.oauth.provider.type chooses the identity). Custom is refused at start-up.',
  },
  providerType: {
    suffix: 'fs.azure.account.oauth.provider.type',
    sensitive: false,
    description:
      'With auth.type OAuth, the identity: org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider (service principal secret → ClientSecretCredential), ' +
      '…MsiTokenProvider (managed identity → ManagedIdentityCredential), …WorkloadIdentityTokenProvider (federated token file → WorkloadIdentityCredential). Others fail start-up.',
  },
  clientId: {
    suffix: 'fs.azure.account.oauth2.client.id',
    sensitive: false,
    description:
      'Application (client) id of the service principal, the user-assigned managed identity or the workload identity. Default for workload identity: AZURE_CLIENT_ID.',
  },
  clientSecret: {
    suffix: 'fs.azure.account.oauth2.client.secret',
    sensitive: true,
    description: 'Client secret of the service principal (ClientCredsTokenProvider). Sent only to the client.endpoint host.',
  },
  clientEndpoint: {
    suffix: 'fs.azure.account.oauth2.client.endpoint',
    sensitive: false,
    description:
      'Token endpoint of the tenant, https://login.microsoftonline.com/<tenant>/oauth2/token (or …/oauth2/v2.0/token): its origin is the authority host, its first path segment the tenant.',
  },
  msiTenant: {
    suffix: 'fs.azure.account.oauth2.msi.tenant',
    sensitive: false,
    description: 'Tenant id for workload identity (default AZURE_TENANT_ID); ignored by managed identity, which has its tenant.',
  },
  msiAuthority: {
    suffix: 'fs.azure.account.oauth2.msi.authority',
    sensitive: false,
    description:
      'Authority host for workload identity, e.g. https://login.microsoftonline.com/ (default AZURE_AUTHORITY_HOST, then the public cloud).',
  },
  tokenFile: {
    suffix: 'fs.azure.account.oauth2.token.file',
    sensitive: false,
    description:
      'Federated token file for workload identity (default AZURE_FEDERATED_TOKEN_FILE, as the Azure Workload Identity webhook injects it).',
  },
} as const;

type OAuthName = keyof typeof OAUTH_SETTINGS;

// The token endpoint is an https URL (a `url` option, checked by the registry); the rest are text.
const typeOf = (suffix: string): Pick<OptionDef, 'type' | 'protocols'> =>
  suffix === OAUTH_SETTINGS.clientEndpoint.suffix ? { type: 'url', protocols: ['https:'] } : { type: 'string' };

export const oauthOptions: OptionDef[] = Object.values(OAUTH_SETTINGS).flatMap((s): OptionDef[] => [
  { key: s.suffix, ...typeOf(s.suffix), section, description: s.description, ...(s.sensitive ? { sensitive: true } : {}) } as OptionDef,
  {
    key: `${s.suffix}.<account-host>`,
    ...typeOf(s.suffix),
    section,
    description: `Per-account form of ${s.suffix}, e.g. ${s.suffix}.myacct.dfs.core.windows.net; wins over the global key.`,
    ...(s.sensitive ? { sensitive: true } : {}),
  } as OptionDef,
]);

const PROVIDERS: Readonly<Record<string, 'client-secret' | 'managed-identity' | 'workload-identity'>> = {
  'org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider': 'client-secret',
  'org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider': 'managed-identity',
  'org.apache.hadoop.fs.azurebfs.oauth2.WorkloadIdentityTokenProvider': 'workload-identity',
};

/** A setting for the account at `hosts` (the URI's host first, then its twin), else the global one, with its key. */
function read(config: Configuration, name: OAuthName, hosts: readonly string[]): { key: string; value: string } | undefined {
  const base = OAUTH_SETTINGS[name].suffix;
  for (const key of [...hosts.map((h) => `${base}.${h}`), base]) {
    const v = config.value(key);
    if (typeof v === 'string' && v.trim() !== '') return { key, value: v.trim() };
  }
  return undefined;
}

/** Whether the account at `hosts` is configured for OAuth (`fs.azure.account.auth.type[.<host>]: OAuth`). */
export function usesOAuth(config: Configuration, hosts: readonly string[]): boolean {
  return read(config, 'authType', hosts)?.value.toLowerCase() === 'oauth';
}

export interface OAuthDeps {
  guard: ConnectGuard;
  /** PEM CA bundle; undefined = system CAs. */
  ca?: string | undefined;
  env?: NodeJS.ProcessEnv;
}

/** The identity an OAuth account reads with, and where its secret (or federated token) may go. */
export interface OAuthIdentity {
  kind: 'client-secret' | 'managed-identity' | 'workload-identity';
  credential: TokenCredential;
  /** The option that chose it (for logs). */
  configKey: string;
}

/** The tenant and authority host in a ClientCredsTokenProvider endpoint (`https://host/<tenant>/oauth2/token`). */
export function parseClientEndpoint(text: string): { authorityHost: URL; tenantId: string } {
  const url = new URL(text);
  const tenantId = url.pathname.split('/').filter(Boolean)[0];
  if (url.protocol !== 'https:' || tenantId === undefined || !/^[A-Za-z0-9.-]{1,100}$/.test(tenantId)) {
    throw new Error('must be https://<authority host>/<tenant>/oauth2/token (or /oauth2/v2.0/token)');
  }
  return { authorityHost: new URL(url.origin), tenantId };
}

/**
 * The options every identity's token requests go out with: the CA bundle added to the default store,
 * and the restricted-host guard on the token endpoint's connections (a configured endpoint on a
 * private address must be exempted like any other). Managed identity talks to the node's own
 * link-local IMDS, which the guard would refuse: it gets only the CA.
 */
function transport(deps: OAuthDeps, authority: URL | undefined): TokenCredentialOptions {
  // Managed identity endpoints are plain http on the node (IMDS, App Service's IDENTITY_ENDPOINT): no https agent there.
  if (authority === undefined) return deps.ca !== undefined ? { tlsOptions: { ca: trustedCa(deps.ca) } } : {};
  const port = Number(authority.port || 443);
  if (isIP(authority.hostname.replace(/^\[|\]$/g, ''))) deps.guard.checkHost(authority.hostname, port);
  return {
    agent: new HttpsAgent({
      keepAlive: true,
      lookup: deps.guard.lookupFor(port),
      ...(deps.ca !== undefined ? { ca: trustedCa(deps.ca) } : {}),
    }),
  };
}

/**
 * Builds the `@azure/identity` credential ABFS's OAuth keys describe for the account at `hosts`. The
 * options were checked at start (`azureOAuthRules`), so a missing piece here is one the environment
 * was to supply (workload identity's AZURE_* variables); the credential then fails its first token
 * request, which the plugin reports as denied.
 */
export function oauthIdentity(config: Configuration, hosts: readonly string[], deps: OAuthDeps): OAuthIdentity {
  const env = deps.env ?? process.env;
  const provider = read(config, 'providerType', hosts);
  const kind = provider === undefined ? 'client-secret' : PROVIDERS[provider.value];
  const configKey = provider?.key ?? read(config, 'authType', hosts)?.key ?? OAUTH_SETTINGS.authType.suffix;
  const clientId = read(config, 'clientId', hosts)?.value;
  if (kind === 'managed-identity') {
    return {
      kind,
      configKey,
      credential: new ManagedIdentityCredential({ ...(clientId !== undefined ? { clientId } : {}), ...transport(deps, undefined) }),
    };
  }
  if (kind === 'workload-identity') {
    const authority = read(config, 'msiAuthority', hosts)?.value ?? env.AZURE_AUTHORITY_HOST;
    const authorityHost = authority !== undefined ? new URL(authority) : undefined;
    const tenantId = read(config, 'msiTenant', hosts)?.value ?? env.AZURE_TENANT_ID;
    const tokenFilePath = read(config, 'tokenFile', hosts)?.value ?? env.AZURE_FEDERATED_TOKEN_FILE;
    const workloadClientId = clientId ?? env.AZURE_CLIENT_ID;
    const credential = new WorkloadIdentityCredential({
      ...(tenantId !== undefined ? { tenantId } : {}),
      ...(workloadClientId ? { clientId: workloadClientId } : {}),
      ...(tokenFilePath !== undefined ? { tokenFilePath } : {}),
      ...(authorityHost !== undefined ? { authorityHost: authorityHost.href, disableInstanceDiscovery: true } : {}),
      ...transport(deps, authorityHost ?? new URL('https://login.microsoftonline.com')),
    });
    return { kind, configKey, credential };
  }
  if (kind !== 'client-secret') throw new Error(`unsupported ${configKey}`); // refused at start-up
  const endpoint = read(config, 'clientEndpoint', hosts);
  const secret = read(config, 'clientSecret', hosts);
  if (endpoint === undefined || secret === undefined || clientId === undefined)
    throw new Error('ClientCredsTokenProvider needs client.id, client.secret and client.endpoint'); // refused at start-up
  const { authorityHost, tenantId } = parseClientEndpoint(endpoint.value);
  // The configured endpoint is the authority: no metadata lookup elsewhere (instance discovery) is made.
  const credential = new ClientSecretCredential(tenantId, clientId, secret.value, {
    authorityHost: authorityHost.href,
    disableInstanceDiscovery: true,
    ...transport(deps, authorityHost),
  });
  return { kind, configKey: secret.key, credential };
}

/** Every account host that has a per-account OAuth key, and the global scope (''). */
function scopes(config: Configuration): string[] {
  const hosts = new Set<string>(['']);
  for (const key of config.keys()) {
    for (const s of Object.values(OAUTH_SETTINGS)) if (key.startsWith(`${s.suffix}.`)) hosts.add(key.slice(s.suffix.length + 1));
  }
  return [...hosts];
}

/** Start-up checks: an auth type and OAuth provider the gateway can act on, with the keys each needs. */
export const azureOAuthRules: readonly ConfigRule[] = [
  {
    keys: oauthOptions.map((d) => d.key),
    description:
      'fs.azure.account.auth.type is SharedKey, SAS or OAuth; with OAuth, the provider type is ClientCredsTokenProvider (with client.id, client.secret ' +
      'and an https client.endpoint), MsiTokenProvider or WorkloadIdentityTokenProvider — globally and per account.',
    check(config) {
      const out: { key: string; message: string }[] = [];
      for (const host of scopes(config)) {
        const hosts = host === '' ? [] : [host];
        const type = read(config, 'authType', hosts);
        if (type !== undefined && !['sharedkey', 'sas', 'oauth'].includes(type.value.toLowerCase())) {
          out.push({
            key: type.key,
            message: `'${type.value}' is not supported by the gateway (SharedKey, SAS or OAuth; a Custom token provider is a Java class it cannot load)`,
          });
          continue;
        }
        if (type?.value.toLowerCase() !== 'oauth') continue;
        const provider = read(config, 'providerType', hosts);
        if (provider !== undefined && PROVIDERS[provider.value] === undefined) {
          out.push({
            key: provider.key,
            message: `names ${provider.value}, which has no counterpart in the gateway; supported: ${Object.keys(PROVIDERS).join(', ')}`,
          });
          continue;
        }
        if (provider === undefined || PROVIDERS[provider.value] === 'client-secret') {
          for (const name of ['clientId', 'clientSecret', 'clientEndpoint'] as const) {
            if (read(config, name, hosts) === undefined)
              out.push({
                key: host === '' ? OAUTH_SETTINGS[name].suffix : `${OAUTH_SETTINGS[name].suffix}.${host}`,
                message: `is needed for OAuth with ClientCredsTokenProvider (${host || 'global settings'})`,
              });
          }
          const endpoint = read(config, 'clientEndpoint', hosts);
          if (endpoint !== undefined) {
            try {
              parseClientEndpoint(endpoint.value);
            } catch (err) {
              out.push({ key: endpoint.key, message: (err as Error).message });
            }
          }
        }
      }
      return out;
    },
  },
];

/** ABFS keys that change how an account is authenticated but that the gateway does not act on. */
const UNSUPPORTED_ABFS: readonly [RegExp, string][] = [
  [
    /^fs\.azure\.account\.oauth2\.msi\.endpoint(?:\..+)?$/,
    'managed identity uses the endpoint the Azure SDK finds (IMDS, or IDENTITY_ENDPOINT on App Service / Arc)',
  ],
  [
    /^fs\.azure\.account\.oauth2\.(?:refresh\.token|user\.name|user\.password)(?:\..+)?$/,
    'refresh-token and user-password OAuth are not supported; use a service principal, managed identity or workload identity',
  ],
  [
    /^fs\.azure\.sas\.token\.provider\.type(?:\..+)?$/,
    'a SAS token provider is a Java class the gateway cannot load; set fs.azure.sas.<container>.<account-host> instead',
  ],
  [
    /^fs\.azure\.account\.keyprovider(?:\..+)?$/,
    'a key provider is a Java class the gateway cannot load; set fs.azure.account.key.<account-host> (e.g. from gateway.secrets.dir)',
  ],
  [/^fs\.azure\.account\.oauth\.provider\.type(?:\..+)?$/, ''],
];

/** Start-up warnings: recognised ABFS keys the fetch does not act on, each named. */
export const azureWarnings: readonly ConfigRule[] = [
  {
    keys: [],
    severity: 'warning',
    description:
      "an ABFS authentication key the gateway recognises but does not act on (MSI endpoint override, refresh-token or user-password OAuth, SAS token or key provider classes); OAuth provider settings while the account's auth type is not OAuth.",
    check(config) {
      const out: { key: string; message: string }[] = [];
      for (const key of config.keys()) {
        const hit = UNSUPPORTED_ABFS.find(([re]) => re.test(key));
        if (hit === undefined) continue;
        if (hit[1] !== '') out.push({ key, message: `recognised ABFS key, not supported by the gateway's fetch and ignored: ${hit[1]}` });
        else {
          const host = key.slice(OAUTH_SETTINGS.providerType.suffix.length + 1);
          if (!usesOAuth(config, host === '' ? [] : [host]))
            out.push({ key, message: "ignored: the account's fs.azure.account.auth.type is not OAuth" });
        }
      }
      return out;
    },
  },
];
