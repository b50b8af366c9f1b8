import type { FsPluginDefinition } from '../../src/plugin-kit';
import { AzureFileSystem } from './azure-file-system';
import { azureOAuthRules, azureWarnings, oauthOptions } from './oauth';
import { azureOptionList } from './options';
import { azureBlobTokenProvider } from './token-provider';

export { AzureFileSystem } from './azure-file-system';
export { parseAzureUri, defaultBlobEndpoint, type AzureBlobLocation } from './azure-uri';
export { lazyDefaultCredential, resolveAzureAuth, type AzureAuth } from './credentials';
export { azureOptions } from './options';
export {
  AZURE_BLOB_JOB_CONTAINERS_KEY,
  AzureBlobDelegationTokenProvider,
  azureBlobProviderOptions,
  type AzureBlobProviderDeps,
  type AzureBlobTokens,
} from './token-provider';

/**
 * Azure Blob Storage: `wasbs://container@account.blob.core.windows.net/path/app.jar`, `wasb://`,
 * and the ABFS forms `abfss://container@account.dfs.core.windows.net/path` / `abfs://`, which are
 * read through the same account's Blob endpoint. All four schemes connect over https unless
 * `fs.azure.account.endpoint.<account>` says otherwise (an emulator, a private proxy).
 *
 * Credentials, per container, in Hadoop's order: `fs.azure.account.key.<account-host>`, then
 * `fs.azure.sas.<container>.<account-host>`, then DefaultAzureCredential (AKS workload identity,
 * managed identity, service principal from the environment). Errors leave as `GW_FETCH_*`.
 */
export const azurePlugin: FsPluginDefinition = {
  name: 'azure',
  schemes: ['wasbs', 'wasb', 'abfss', 'abfs'],
  options: [...azureOptionList, ...oauthOptions],
  rules: [...azureOAuthRules, ...azureWarnings],
  // Endpoint overrides are `url` options: the registry refuses a bad one at start-up.
  create: (ctx) => new AzureFileSystem(ctx),
  tokenProvider: azureBlobTokenProvider,
};
