import type { FsPluginDefinition } from '../../plugin-kit/fs-plugin';
import { oauth2TokenProvider } from './oauth2-provider';
import type { BuiltInTokenProvider } from '../../plugin-kit/provider-support';

export { OAuth2DelegationTokenProvider, OAUTH2_JOB_SCOPE_KEY, oauth2ProviderOptions } from './oauth2-provider';
export type { OAuth2Tokens } from './oauth2-provider';
export type { BuiltInTokenProvider, ProviderDeps } from '../../plugin-kit/provider-support';

/**
 * The built-in delegation-token providers, for the composition root: each filesystem plugin's own
 * (s3 on STS, azure-blob on SAS — each plugin owns its SDK) and the SDK-free oauth2 provider. Merge
 * each one's `options` into the options registry and `create` them (with the same `ProviderDeps`:
 * clock, logger, CA). Each stays inactive (`delegationTokensRequired() === false`) until its
 * credentials are configured, and then rejects jobs that ask it for something. Note that the
 * manager requires a receiver with the same service name for every enabled provider (name-set
 * check), so a provider without a receiver must be disabled with
 * `security.delegation.token.provider.<name>.enabled: false` or left out of the list.
 */
export function tokenProvidersOf(plugins: readonly FsPluginDefinition[]): readonly BuiltInTokenProvider[] {
  return [...plugins.flatMap((p) => (p.tokenProvider ? [p.tokenProvider] : [])), oauth2TokenProvider];
}
