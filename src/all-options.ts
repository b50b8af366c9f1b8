import { artifactRules } from './artifacts/artifact-rules';
import { artifactOptions } from './artifacts/options';
import { clusterRules } from './cluster/cluster-rules';
import { coreOptions } from './config/options';
import { OptionsRegistry } from './config/registry';
import { haOptions, haRules } from './ha/ha-options';
import { httpRules } from './http/http-rules';
import type { FsPluginDefinition } from './plugin-kit/fs-plugin';
import { tokenProvidersOf } from './tokens/providers';
import { tokenOptions, tokenRules } from './tokens/token-options';
import { v8Options } from './v8-tuning';

/** Every option and cross-option rule the gateway knows: each feature's, and each plugin's own (with its token provider's). */
export function createRegistry(plugins: readonly FsPluginDefinition[] = []): OptionsRegistry {
  const providers = tokenProvidersOf(plugins);
  const options = [coreOptions, artifactOptions, tokenOptions, haOptions, v8Options].flatMap((o) => Object.values(o));
  return new OptionsRegistry(
    [...options, ...plugins.flatMap((p) => p.options), ...providers.flatMap((p) => p.options)],
    [
      ...httpRules,
      ...clusterRules,
      ...artifactRules,
      ...tokenRules,
      ...haRules,
      ...plugins.flatMap((p) => p.rules ?? []),
      ...providers.flatMap((p) => p.rules ?? []),
    ],
  );
}
