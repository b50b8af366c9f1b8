import { coreOptions as o } from '../config/options';
import { caBundleRule, privateDirsRule } from '../config/rule-kit';
import type { ConfigRule } from '../config/registry';
import { artifactOptions } from './options';

/** Flink filesystems the gateway has no built-in plugin for, by their configuration keys. */
const UNSERVED_FILESYSTEMS: readonly [RegExp, string][] = [
  [/^fs\.oss\./, 'oss://'],
  [/^fs\.cosn\./, 'cosn://'],
  [/^fs\.obs\./, 'obs://'],
  [/^fs\.adl\./, 'adl://'],
];

/**
 * The rules across the artifact options: the hand-off mode against the JobManager, the plugins' CA
 * bundle, the cache directory, and Flink filesystem keys no plugin serves. Each plugin and each token
 * provider declares its own rules next to its options.
 */
export const artifactRules: readonly ConfigRule[] = [
  {
    keys: [artifactOptions.handoff.key, o.jobManagerUploadDir.key, o.clusterRestUrl.key],
    description: 'shared-dir needs web.upload.dir when fronting an existing JobManager (the embedded cluster has its own).',
    check(config) {
      const fronting = config.getOptional(o.clusterRestUrl) !== undefined;
      if (config.get(artifactOptions.handoff) !== 'shared-dir' || !fronting || config.getOptional(o.jobManagerUploadDir) !== undefined)
        return [];
      return [
        {
          key: artifactOptions.handoff.key,
          message:
            "shared-dir needs web.upload.dir: set it to the JobManager's web.upload.dir as the gateway sees it (a shared volume), or use upload",
        },
      ];
    },
  },
  caBundleRule(artifactOptions.caBundle),
  privateDirsRule([artifactOptions.cacheDir]),
  {
    keys: [],
    severity: 'warning',
    description:
      "a key of one of Flink's filesystems that no plugin of this gateway serves (Alibaba OSS fs.oss.*, " +
      'Tencent COS fs.cosn.*, Huawei OBS fs.obs.*, Azure Data Lake Gen1 fs.adl.*): its jar URIs are refused, and the key is not used.',
    check(config) {
      const out: { key: string; message: string }[] = [];
      for (const key of config.keys()) {
        // A plugin that serves the scheme (a third-party one) declares its keys: those are its business.
        if (config.registry.lookup(key) !== undefined) continue;
        const fs = UNSERVED_FILESYSTEMS.find(([re]) => re.test(key));
        if (fs)
          out.push({
            key,
            message: `a Flink filesystem key for ${fs[1]}, which no plugin of this gateway serves: ${fs[1]} jar URIs are refused (GW_FETCH_SCHEME_UNSUPPORTED) and the key is not used`,
          });
      }
      return out;
    },
  },
];
