import { AZURE_BLOB_JOB_CONTAINERS_KEY, azureBlobTokenProvider } from './azure-blob-provider';
import { OAUTH2_JOB_SCOPE_KEY, oauth2TokenProvider } from './oauth2-provider';
import type { BuiltInTokenProvider } from './provider-support';
import { S3_JOB_ROLE_ARN_KEY, s3TokenProvider } from './s3-provider';

export { AzureBlobDelegationTokenProvider, AZURE_BLOB_JOB_CONTAINERS_KEY, azureBlobProviderOptions } from './azure-blob-provider';
export type { AzureBlobProviderDeps, AzureBlobTokens } from './azure-blob-provider';
export { S3DelegationTokenProvider, S3_JOB_ROLE_ARN_KEY, s3ProviderOptions } from './s3-provider';
export type { S3Tokens } from './s3-provider';
export { OAuth2DelegationTokenProvider, OAUTH2_JOB_SCOPE_KEY, oauth2ProviderOptions } from './oauth2-provider';
export type { OAuth2Tokens } from './oauth2-provider';
export type { BuiltInTokenProvider, ProviderDeps } from './provider-support';

/** The job configuration keys through which jobs ask the built-in providers for something; never sensitive. */
export const JOB_REQUEST_KEYS: readonly string[] = [AZURE_BLOB_JOB_CONTAINERS_KEY, S3_JOB_ROLE_ARN_KEY, OAUTH2_JOB_SCOPE_KEY];

/**
 * The built-in delegation-token providers, for the composition root: merge each one's `options`
 * into the options registry and `create` them (with the same `ProviderDeps`: clock, logger, CA).
 * Each stays inactive (`delegationTokensRequired() === false`) until its credentials are
 * configured, and then rejects jobs that ask it for something. Note that the manager requires a
 * receiver with the same service name for every enabled provider (name-set check), so a provider
 * without a receiver must be disabled with `security.delegation.token.provider.<name>.enabled: false`
 * or left out of the list.
 */
export const builtInTokenProviders: readonly BuiltInTokenProvider[] = [azureBlobTokenProvider, s3TokenProvider, oauth2TokenProvider];
