import type { FsPluginDefinition } from '../src/plugin-kit/fs-plugin';
import { type BuiltInTokenProvider, tokenProvidersOf } from '../src/tokens/providers';
import { azurePlugin } from './azure';
import { filePlugin } from './file';
import { gcsPlugin } from './gcs';
import { httpPlugin } from './http';
import { s3Plugin } from './s3';

/** The filesystem plugins shipped with the gateway (third-party ones load from gateway.plugins.dir). */
export const builtinPlugins: readonly FsPluginDefinition[] = [s3Plugin, azurePlugin, gcsPlugin, httpPlugin, filePlugin];

/** The delegation-token providers that come with the built-in plugins, plus oauth2. */
export const builtinTokenProviders: readonly BuiltInTokenProvider[] = tokenProvidersOf(builtinPlugins);
