import { ConfigError, type FsPluginDefinition } from '../../src/plugin-kit';
import { LocalFileSystem, resolveAllowedDirs } from './local-file-system';
import { fileOptions, fileRules } from './options';

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
  rules: fileRules,
  create: ({ config }) => {
    if (!config.get(fileOptions.enabled)) return new LocalFileSystem(undefined);
    const key = fileOptions.allowedDirs.key;
    // `fileRules` checked these at resolve time; a directory removed since then still fails here.
    const { dirs, problems } = resolveAllowedDirs(config.getOptional(fileOptions.allowedDirs) ?? []);
    if (problems.length > 0) throw new ConfigError(problems.map((message) => ({ key, source: 'configuration', message })));
    return new LocalFileSystem(dirs);
  },
};
