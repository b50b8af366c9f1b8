import { ConfigError, type FsPluginDefinition } from '../../src/artifacts/plugin-kit';
import { LocalFileSystem, resolveAllowedDirs } from './local-file-system';
import { fileOptions } from './options';

export { LocalFileSystem } from './local-file-system';
export { fileOptions } from './options';

/**
 * `file://` jar URIs from the gateway's own disk — for development only, off by default. When
 * enabled, `gateway.artifacts.local-file.allowed-dirs` is required and confines every read.
 */
export const filePlugin: FsPluginDefinition = {
  name: 'file',
  schemes: ['file'],
  options: Object.values(fileOptions),
  create: ({ config }) => {
    if (!config.get(fileOptions.enabled)) return new LocalFileSystem(undefined);
    const configured = config.getOptional(fileOptions.allowedDirs) ?? [];
    const key = fileOptions.allowedDirs.key;
    if (configured.length === 0) {
      throw new ConfigError([{ key, source: 'configuration', message: `required when ${fileOptions.enabled.key} is true` }]);
    }
    const { dirs, problems } = resolveAllowedDirs(configured);
    if (problems.length > 0) throw new ConfigError(problems.map((message) => ({ key, source: 'configuration', message })));
    return new LocalFileSystem(dirs);
  },
};
