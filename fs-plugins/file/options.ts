import type { OptionDef } from '../../src/artifacts/plugin-kit';

const SECTION = 'Remote jars: local files (development only)';

export const fileOptions = {
  enabled: {
    key: 'gateway.artifacts.local-file.enabled', deprecatedKeys: ['user.artifacts.local-file.enabled'], type: 'boolean', default: false, section: SECTION,
    description:
      'Accept file:// jar URIs, read from the gateway\'s own filesystem. For development only: it lets whoever can ' +
      'submit a job read any jar under gateway.artifacts.local-file.allowed-dirs.',
  } satisfies OptionDef<'boolean'>,
  allowedDirs: {
    key: 'gateway.artifacts.local-file.allowed-dirs', deprecatedKeys: ['user.artifacts.local-file.allowed-dirs'], type: 'list', section: SECTION,
    description:
      'Absolute directories (;-separated) that file:// URIs may read from; required when local files are enabled. ' +
      'Paths are compared after resolving symbolic links and .., so neither can escape them.',
  } satisfies OptionDef<'list'>,
};
