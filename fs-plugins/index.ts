import type { FsPluginDefinition } from '../src/artifacts/fs-plugin';
import { azurePlugin } from './azure';
import { filePlugin } from './file';
import { httpPlugin } from './http';
import { s3Plugin } from './s3';

/** The filesystem plugins shipped with the gateway (third-party ones load from gateway.plugins.dir). */
export const builtinPlugins: readonly FsPluginDefinition[] = [s3Plugin, azurePlugin, httpPlugin, filePlugin];
