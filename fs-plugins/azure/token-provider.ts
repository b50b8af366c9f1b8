import { DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import { ContainerSASPermissions, StorageSharedKeyCredential } from '@azure/storage-blob';
import type { ConfigRule, OptionDef } from '../../src/plugin-kit';
import { JobRefusedError } from '../../src/plugin-kit';
import type { JobConfiguration, JobContext, ObtainedDelegationTokens, ProviderConfig } from '../../src/plugin-kit';
import {
  JOB_REQUEST_PREFIX,
  JobScopedProvider,
  allOrNone,
  allOrNoneRule,
  httpsUnlessLoopback,
  jobValue,
  obtainedTokens,
  parseEndpoint,
  providerKey,
  providerSection,
  readProviderOptions,
  splitList,
  type BuiltInTokenProvider,
  type ParsedOptions,
  type ProviderDeps,
  PrincipalAllowList,
} from '../../src/plugin-kit';
import { AccountKeySasSigner, UserDelegationSasSigner, type SasSigner } from './sas-signer';

const NAME = 'azure-blob';
const SECTION = providerSection(NAME);

/**
 * The job configuration key with which a job asks for SAS tokens: a `;`-separated list of container
 * names of the configured account (commas are accepted too), e.g. `raw-events;reference-data`.
 */
export const AZURE_BLOB_JOB_CONTAINERS_KEY = `${JOB_REQUEST_PREFIX}.${NAME}.containers`;

/** The provider's options, under `security.delegation.token.provider.azure-blob.*`. */
export const azureBlobProviderOptionDefs = {
  auth: {
    key: providerKey(NAME, 'auth'),
    type: 'enum',
    values: ['account-key', 'user-delegation'],
    default: 'account-key',
    section: SECTION,
    description:
      '`account-key`: service SAS signed locally with `account-key`. `user-delegation`: user-delegation SAS, signed with a key the ' +
      "gateway's Microsoft Entra identity (DefaultAzureCredential: workload identity, managed identity, service principal " +
      'environment) obtains from the account on every cycle; needs an https endpoint and a role with ' +
      '`generateUserDelegationKey`, and no account key.',
  },
  accountName: {
    key: providerKey(NAME, 'account-name'),
    type: 'string',
    section: SECTION,
    description:
      'Storage account whose containers jobs may ask for. With `account-key` (or `auth: user-delegation`) it activates the provider.',
  },
  accountKey: {
    key: providerKey(NAME, 'account-key'),
    type: 'string',
    sensitive: true,
    check: (key: string) => (BASE64.test(key) ? undefined : 'is not a base64 account key (value not shown)'),
    section: SECTION,
    description: 'Shared key (base64) of `account-name`; signs the per-job service SAS tokens. Never leaves the gateway.',
  },
  endpoint: {
    key: providerKey(NAME, 'endpoint'),
    type: 'url',
    check: httpsUnlessLoopback,
    section: SECTION,
    description:
      'Blob endpoint handed to jobs with their tokens. Default `https://<account-name>.blob.core.windows.net`; for Azurite the ' +
      'path-style `http://127.0.0.1:10000/<account-name>`. With an https endpoint the SAS is restricted to https.',
  },
  allowedContainers: {
    key: providerKey(NAME, 'allowed-containers'),
    type: 'list',
    default: [],
    section: SECTION,
    description: `Containers a job may ask for in \`${AZURE_BLOB_JOB_CONTAINERS_KEY}\` (\`;\`-separated). A job asking for any other container is rejected. An entry may be tied to one principal, \`token:<name>=<item>\` or \`cert:<CN>=<item>\`: then only that submitter may ask for it; entries without a principal are for every submitter.`,
  },
  sasLifetime: {
    key: providerKey(NAME, 'sas-lifetime'),
    type: 'duration',
    default: 3_600_000,
    min: 60_000,
    section: SECTION,
    description:
      "Lifetime of each SAS from the time it is signed; renewal happens at the manager's ratio of it. At most 7 days with " +
      '`auth: user-delegation`.',
  },
  permissions: {
    key: providerKey(NAME, 'permissions'),
    type: 'string',
    default: 'r',
    check: permissionsProblem,
    section: SECTION,
    description: 'Container SAS permissions (letters of `racwdxltmeiyf`, e.g. `r` or `rl`). The same for every job.',
  },
} satisfies Record<string, OptionDef>;

/** The same options as the typed list the options registry takes. */
export const azureBlobProviderOptions: OptionDef[] = Object.values(azureBlobProviderOptionDefs);

/** What each `auth` mode needs, checked with every other option at start-up. */
export const azureBlobProviderRules: readonly ConfigRule[] = [
  {
    ...allOrNoneRule(
      [azureBlobProviderOptionDefs.accountName, azureBlobProviderOptionDefs.accountKey],
      'the account and its shared key, with auth: account-key',
    ),
    check(config) {
      const d = azureBlobProviderOptionDefs;
      if (config.get(d.auth) !== 'account-key') return [];
      return allOrNoneRule([d.accountName, d.accountKey], '').check(config);
    },
  },
  {
    keys: [
      azureBlobProviderOptionDefs.auth.key,
      azureBlobProviderOptionDefs.accountName.key,
      azureBlobProviderOptionDefs.accountKey.key,
      azureBlobProviderOptionDefs.sasLifetime.key,
      azureBlobProviderOptionDefs.endpoint.key,
    ],
    description: 'user-delegation needs account-name and an https endpoint, no account-key, and a SAS lifetime of at most 7 days.',
    check(config) {
      const d = azureBlobProviderOptionDefs;
      if (config.get(d.auth) !== 'user-delegation') return [];
      const problems: { key: string; message: string }[] = [];
      if ((config.getOptional(d.accountName) ?? '') === '')
        problems.push({ key: d.accountName.key, message: `is required with ${d.auth.key}: user-delegation` });
      if ((config.getOptional(d.accountKey) ?? '') !== '')
        problems.push({ key: d.accountKey.key, message: `is not used with ${d.auth.key}: user-delegation; remove it` });
      if (config.get(d.sasLifetime) > SEVEN_DAYS_MS)
        problems.push({ key: d.sasLifetime.key, message: 'is above 7 days, the longest a user delegation key lives' });
      const endpoint = config.getOptional(d.endpoint);
      if (endpoint !== undefined && new URL(endpoint).protocol !== 'https:') {
        problems.push({ key: d.endpoint.key, message: 'must be https with user-delegation (the bearer token and the key travel on it)' });
      }
      return problems;
    },
  },
];

/** One container's entry in the payload. */
export interface AzureBlobContainerToken {
  /** SAS query string without the leading `?`. */
  sas: string;
  /** ISO 8601 */
  expiresOn: string;
}

/** What `obtainDelegationTokens()` returns (UTF-8 JSON); receivers parse this. */
export interface AzureBlobTokens {
  version: 1;
  accountName: string;
  /** Where the containers live, e.g. `https://acct.blob.core.windows.net` (no trailing slash). */
  blobEndpoint: string;
  jobs: Record<string, Record<string, AzureBlobContainerToken>>;
}

interface Settings {
  accountName: string;
  signer: SasSigner;
  endpoint: URL;
  allowed: PrincipalAllowList;
  lifetimeMs: number;
}

/** What the azure-blob provider takes besides the common deps. */
export interface AzureBlobProviderDeps extends ProviderDeps {
  /** The Entra identity for `auth: user-delegation`; default `DefaultAzureCredential`, built only in that mode. */
  azureCredential?: TokenCredential;
}

const SEVEN_DAYS_MS = 7 * 24 * 3_600_000;

/** Clock-skew allowance: a SAS starts a little in the past, so a receiver whose clock runs behind can use it at once. */
const START_SKEW_MS = 5 * 60_000;

/**
 * Per-job Azure Blob SAS tokens. For each registered job that lists containers under
 * `security.delegation.job.azure-blob.containers`, every obtain signs one read-only (by default)
 * **container SAS per container**, valid for `sas-lifetime`: with `auth: account-key` (default) a
 * service SAS signed with the cluster's account key, locally, no network call; with
 * `auth: user-delegation` a user-delegation SAS signed with a key that the gateway's Entra identity
 * fetches once per cycle. Containers must be on `allowed-containers`, otherwise `registerJob`
 * throws and the job is rejected.
 *
 * - `delegationTokensRequired()` is true while at least one job holds containers (no cluster-level
 *   token: the account key itself is the cluster's credential and stays in the gateway).
 * - `validUntil` is the earliest SAS expiry of the cycle (for user delegation, capped by the key's expiry).
 * - Payload: {@link AzureBlobTokens}, `{"version":1,"accountName":…,"blobEndpoint":…,"jobs":{"<jobId>":{"<container>":{"sas":…,"expiresOn":…}}}}`.
 * - Without `account-name` and `account-key` (account-key mode) the provider stays inactive, and a
 *   job that asks for containers is rejected with a message naming the options to set.
 */
export class AzureBlobDelegationTokenProvider extends JobScopedProvider<readonly string[], Settings> {
  readonly jobRequestKeys = [AZURE_BLOB_JOB_CONTAINERS_KEY];

  constructor(private readonly deps: AzureBlobProviderDeps = {}) {
    super(NAME, deps, (a, b) => a.join(';') === b.join(';'), 'job registered for Azure Blob SAS tokens');
  }

  protected configure(config: ProviderConfig): Settings | undefined {
    const o = readProviderOptions(NAME, azureBlobProviderOptionDefs, config, azureBlobProviderRules);
    if (o.auth === 'user-delegation') return userDelegationSettings(o, this.deps);
    if (!allOrNone([o.accountName, o.accountKey])) {
      this.log?.debug('inactive: account-name and account-key are not set');
      return undefined;
    }
    return accountKeySettings(o);
  }

  /**
   * The job's containers, each on the allow-list. A job that asks for nothing is not tracked (and an
   * earlier request is dropped).
   */
  protected stateFor(jobConfiguration: JobConfiguration, context: JobContext, s: Settings | undefined): readonly string[] | undefined {
    const requested = jobValue(jobConfiguration, AZURE_BLOB_JOB_CONTAINERS_KEY);
    if (requested === undefined) return undefined;
    const containers = splitList(requested);
    if (s === undefined) {
      throw new JobRefusedError(
        `the job asks for Azure Blob containers (${AZURE_BLOB_JOB_CONTAINERS_KEY}) but the gateway has no account configured ` +
          `(set ${azureBlobProviderOptionDefs.accountName.key} and ${azureBlobProviderOptionDefs.accountKey.key})`,
      );
    }
    const refused = containers.filter((c) => !s.allowed.allows(context.principal, c));
    if (refused.length > 0) {
      throw new JobRefusedError(
        `container${refused.length === 1 ? '' : 's'} ${refused.map((c) => `'${c}'`).join(', ')} of account '${s.accountName}' ` +
          `${refused.length === 1 ? 'is' : 'are'} not allowed for jobs (${AZURE_BLOB_JOB_CONTAINERS_KEY}); an administrator can add ` +
          `${refused.length === 1 ? 'it' : 'them'} to ${azureBlobProviderOptionDefs.allowedContainers.key}`,
      );
    }
    return containers;
  }

  protected describe(containers: readonly string[]): Record<string, unknown> {
    return { containers };
  }

  /** One SAS per container of every job, from one signing window per cycle. */
  protected async obtainFor(s: Settings, snapshot: ReadonlyMap<string, readonly string[]>): Promise<ObtainedDelegationTokens> {
    const jobs: AzureBlobTokens['jobs'] = {};
    let validUntil: number | undefined;
    if (snapshot.size > 0) {
      const now = this.now();
      const window = await s.signer.open(new Date(now - START_SKEW_MS), new Date(now + s.lifetimeMs));
      const expiresOn = window.expiresOn.toISOString();
      for (const [jobId, containers] of snapshot) {
        // A job unregistered while a user-delegation key was being fetched gets nothing.
        if (!this.jobs.has(jobId)) continue;
        const entry: Record<string, AzureBlobContainerToken> = {};
        for (const container of containers) entry[container] = { sas: window.signContainer(container), expiresOn };
        jobs[jobId] = entry;
      }
      if (Object.keys(jobs).length > 0) validUntil = window.expiresOn.getTime();
    }
    const payload: AzureBlobTokens = { version: 1, accountName: s.accountName, blobEndpoint: s.endpoint.href.replace(/\/+$/, ''), jobs };
    return obtainedTokens(payload, validUntil);
  }

  protected override async release(): Promise<void> {
    this.settings?.signer.close();
  }
}

type AzureOptions = ParsedOptions<typeof azureBlobProviderOptionDefs>;

/** `o` passed `readProviderOptions`, so the key is base64 and the mode's rules hold. */
function accountKeySettings(o: AzureOptions): Settings {
  const accountName = o.accountName!;
  const credential = new StorageSharedKeyCredential(accountName, o.accountKey!);
  const endpoint = endpointOf(o, accountName);
  return {
    ...common(o, accountName, endpoint),
    signer: new AccountKeySasSigner({ accountName, endpoint, permissions: permissionsOf(o) }, credential),
  };
}

function userDelegationSettings(o: AzureOptions, deps: AzureBlobProviderDeps): Settings {
  const accountName = o.accountName!;
  const endpoint = endpointOf(o, accountName);
  const credential = deps.azureCredential ?? new DefaultAzureCredential();
  const signer = new UserDelegationSasSigner({ accountName, endpoint, permissions: permissionsOf(o) }, credential, deps.ca);
  return { ...common(o, accountName, endpoint), signer };
}

function common(o: AzureOptions, accountName: string, endpoint: URL): Omit<Settings, 'signer'> {
  return { accountName, endpoint, allowed: new PrincipalAllowList(o.allowedContainers ?? []), lifetimeMs: o.sasLifetime ?? 3_600_000 };
}

function endpointOf(o: AzureOptions, accountName: string): URL {
  return parseEndpoint(azureBlobProviderOptionDefs.endpoint.key, o.endpoint ?? `https://${accountName}.blob.core.windows.net`);
}

function permissionsOf(o: AzureOptions): ContainerSASPermissions {
  return ContainerSASPermissions.parse(o.permissions ?? 'r');
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The `permissions` option's check: letters the SDK knows, granting something. */
function permissionsProblem(text: string): string | undefined {
  try {
    return ContainerSASPermissions.parse(text).toString() === '' ? 'grants nothing; use e.g. r' : undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The `azure-blob` provider for the composition root. */
export const azureBlobTokenProvider: BuiltInTokenProvider = {
  serviceName: NAME,
  options: azureBlobProviderOptions,
  rules: azureBlobProviderRules,
  create: (deps) => new AzureBlobDelegationTokenProvider(deps),
};
