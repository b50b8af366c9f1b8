import { isAbsolute } from 'node:path';
import type { ConfigRule, OptionDef } from '../../src/plugin-kit';
import { resolveAllowedDirs } from './local-file-system';

const SECTION = 'Remote jars: local files (development only)';

export const fileOptions = {
  enabled: {
    key: 'gateway.artifacts.local-file.enabled',
    deprecatedKeys: ['user.artifacts.local-file.enabled'],
    type: 'boolean',
    default: false,
    section: SECTION,
    description:
      "Accept file:// jar URIs, read from the gateway's own filesystem. For development only: it lets whoever can " +
      'submit a job read any jar under gateway.artifacts.local-file.allowed-dirs.',
  } satisfies OptionDef<'boolean'>,
  allowedDirs: {
    key: 'gateway.artifacts.local-file.allowed-dirs',
    deprecatedKeys: ['user.artifacts.local-file.allowed-dirs'],
    type: 'list',
    section: SECTION,
    check: (dirs: string[]) => dirs.filter((d) => !isAbsolute(d)).map((d) => `'${d}' is not an absolute path`),
    description:
      'Absolute directories (;-separated) that file:// URIs may read from; required when local files are enabled. ' +
      'Paths are compared after resolving symbolic links and .., so neither can escape them.',
  } satisfies OptionDef<'list'>,
};

/** Local files need their confinement: the directories, which must exist (they are resolved once). */
export const fileRules: readonly ConfigRule[] = [
  {
    keys: [fileOptions.enabled.key, fileOptions.allowedDirs.key],
    description: 'local files need gateway.artifacts.local-file.allowed-dirs.',
    check(config) {
      if (!config.get(fileOptions.enabled) || (config.getOptional(fileOptions.allowedDirs) ?? []).length > 0) return [];
      return [{ key: fileOptions.allowedDirs.key, message: `required when ${fileOptions.enabled.key} is true` }];
    },
  },
  {
    keys: [fileOptions.enabled.key, fileOptions.allowedDirs.key],
    description: 'each allowed directory must exist (symbolic links and .. are resolved at start).',
    reads: 'files',
    check(config) {
      if (!config.get(fileOptions.enabled)) return [];
      const dirs = (config.getOptional(fileOptions.allowedDirs) ?? []).filter((d) => isAbsolute(d));
      return resolveAllowedDirs(dirs).problems.map((message) => ({ key: fileOptions.allowedDirs.key, message }));
    },
  },
];
