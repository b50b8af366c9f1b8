/**
 * The plugin API: everything a built-in fs-plugin (`fs-plugins/<name>/`) imports from the gateway,
 * and nothing else — the contract's types, the error helpers, the option and configuration types,
 * and the shared network pieces every plugin needs the same way (the guarded connector, the CA
 * bundle's trust store, the walk of an error's cause chain). A plugin that needs more asks for it
 * here, so what plugins depend on stays one short list (fs-plugins/README.md).
 */
export type { ConnectGuard, FileSystem, FsPluginDefinition, ObjectStat, OpenedObject, OpenOptions, PluginContext } from './fs-plugin';
export { fetchError } from './fetch-error';
export { redactUri } from './uri';
export { errorChain, findGatewayError, specificErrorCode } from './error-chain';
export { guardedConnector, trustedCa } from '../net/guarded-connector';
export { BulkHttpClient, BulkHttpError, discardBody, type BulkResponse } from '../download/bulk-http';
export { GatewayError, isGatewayError } from '../errors/gateway-error';
export { ConfigError, type ConfigRule, type Configuration, type ConfigProblem } from '../config/registry';
export { option, parseUrl, type OptionDef } from '../config/types';
export { gatewayVersion } from '../project-root';
// A plugin's delegation-token provider (FsPluginDefinition.tokenProvider) is written against the
// token SPI and the providers' shared helpers; they are part of the plugin API too.
export type {
  DelegationTokenManagerCallback,
  DelegationTokenProvider,
  JobConfiguration,
  JobContext,
  ObtainedDelegationTokens,
  ProviderConfig,
} from './token-spi';
export * from './provider-support';
export { JobRefusedError } from './registration-error';
