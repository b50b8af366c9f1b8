import type { FsPluginDefinition } from '../../src/plugin-kit';
import { GcsFileSystem } from './gcs-file-system';
import { gcsOptions, gcsRules, gcsWarnings } from './options';

export { GcsFileSystem, DEFAULT_ROOT_URL } from './gcs-file-system';
export { GcsCredentials, GOOGLE_TOKEN_URL } from './credentials';
export { parseGcsUri, type GcsLocation } from './gcs-uri';
export { gcsOptions } from './options';

/**
 * Google Cloud Storage: `gs://bucket/path/app.jar`, read through the JSON API at
 * `fs.gs.storage.root.url` (default https://storage.googleapis.com/).
 *
 * Credentials from the GCS connector's keys (`fs.gs.*`, Flink's `gs.*` mirror): a service-account key
 * file, an external-account file (workload identity federation), Application Default Credentials
 * (GOOGLE_APPLICATION_CREDENTIALS, then the metadata server: GKE Workload Identity, Compute Engine),
 * or none for public objects. `google-auth-library` supplies the credential; reads go through the
 * plugin kit's bulk client, every range pinned to the object's generation. No delegation-token
 * provider: see the plugin's README. Errors leave as `GW_FETCH_*`.
 */
export const gcsPlugin: FsPluginDefinition = {
  name: 'gcs',
  schemes: ['gs'],
  options: gcsOptions,
  rules: [...gcsRules, ...gcsWarnings],
  create: (ctx) => new GcsFileSystem(ctx),
};
