import { DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import { AnonymousCredential, StorageSharedKeyCredential } from '@azure/storage-blob';
import type { Configuration } from '../../src/plugin-kit';
import { configuredSecret } from './options';
import { credentialHosts, type AzureBlobLocation } from './azure-uri';
import { usesOAuth, type OAuthIdentity } from './oauth';

/**
 * How requests for one container are authorised. `configKey` names the option the secret came from
 * (never the secret itself), for logs.
 */
export type AzureAuth =
  | { kind: 'shared-key'; configKey: string; credential: StorageSharedKeyCredential }
  | { kind: 'sas'; configKey: string; credential: AnonymousCredential; sas: string }
  | { kind: 'default-azure-credential'; credential: TokenCredential }
  | { kind: 'oauth'; configKey: string; credential: TokenCredential; identity: OAuthIdentity['kind'] };

/**
 * Chooses the credential for `location`: ABFS OAuth when `fs.azure.account.auth.type` says so for
 * the account (oauth.ts: client secret, managed identity, workload identity); else, in Hadoop's order, an account key
 * (`fs.azure.account.key.<host>`), else a container SAS (`fs.azure.sas.<container>.<host>`), else
 * `DefaultAzureCredential`, which finds the cluster's own identity: AKS workload identity
 * (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`), a service principal in
 * `AZURE_CLIENT_SECRET`/`AZURE_CLIENT_CERTIFICATE_PATH`, or the VM/pod managed identity.
 * `defaultCredential` is called only when needed, so a gateway that uses keys never builds it.
 */
export function resolveAzureAuth(
  config: Configuration,
  location: AzureBlobLocation,
  defaultCredential: () => TokenCredential,
  oauth?: (hosts: readonly string[]) => OAuthIdentity,
): AzureAuth {
  // ABFS's fs.azure.account.auth.type: OAuth chooses the configured identity over any key or SAS.
  const hosts = credentialHosts(location);
  if (oauth !== undefined && usesOAuth(config, hosts)) {
    const identity = oauth(hosts);
    return { kind: 'oauth', configKey: identity.configKey, credential: identity.credential, identity: identity.kind };
  }
  const secret = configuredSecret(config, credentialHosts(location), location.container);
  if (secret?.kind === 'shared-key') {
    return { kind: 'shared-key', configKey: secret.key, credential: new StorageSharedKeyCredential(location.account, secret.accountKey) };
  }
  if (secret?.kind === 'sas') {
    return { kind: 'sas', configKey: secret.key, credential: new AnonymousCredential(), sas: secret.sas };
  }
  return { kind: 'default-azure-credential', credential: defaultCredential() };
}

/** One DefaultAzureCredential per file system, built on first use (it probes the environment). */
export function lazyDefaultCredential(): () => TokenCredential {
  let credential: TokenCredential | undefined;
  return () => (credential ??= new DefaultAzureCredential());
}
