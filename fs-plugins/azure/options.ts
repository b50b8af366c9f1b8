import type { Configuration, OptionDef } from '../../src/plugin-kit';

const section = 'Azure Blob Storage (wasbs://, abfss://)';

/**
 * Option keys of the Azure plugin. The key names are Hadoop's (hadoop-azure WASB/ABFS), so a Flink
 * configuration file that already carries them works unchanged. Precedence per URI, as in Hadoop:
 * account key → container SAS → DefaultAzureCredential (workload / managed identity).
 */
export const azureOptions = {
  accountKeyBlob: {
    key: 'fs.azure.account.key.<account>.blob.core.windows.net',
    type: 'string',
    sensitive: true,
    section,
    description:
      'Shared key (base64) of the storage account <account>, used for wasbs://, wasb://, abfss:// and abfs:// URIs of that account.',
  },
  accountKeyDfs: {
    key: 'fs.azure.account.key.<account>.dfs.core.windows.net',
    type: 'string',
    sensitive: true,
    section,
    description: 'The same shared key under its ABFS (.dfs.) name; either name works for either scheme.',
  },
  accountKeyOtherCloud: {
    key: 'fs.azure.account.key.<account-host>',
    type: 'string',
    sensitive: true,
    section,
    description:
      'Shared key for an account in another Azure cloud, keyed by the account host, e.g. fs.azure.account.key.myacct.blob.core.chinacloudapi.cn.',
  },
  containerSas: {
    key: 'fs.azure.sas.<container>.<account>.blob.core.windows.net',
    type: 'string',
    sensitive: true,
    section,
    description:
      'SAS token (the query string without the leading "?") for one container, used when no account key is set. Needs read permission (sp=r) on the blobs.',
  },
  containerSasOtherCloud: {
    key: 'fs.azure.sas.<container>.<account-host>',
    type: 'string',
    sensitive: true,
    section,
    description:
      'Container SAS for an account in another Azure cloud or under its .dfs. host, e.g. fs.azure.sas.jars.myacct.dfs.core.windows.net.',
  },
  accountEndpoint: {
    key: 'fs.azure.account.endpoint.<account>',
    type: 'url',
    section,
    description:
      'Blob service endpoint that replaces https://<account>.blob.<cloud suffix> for the account, path-style for emulators and private proxies, e.g. http://127.0.0.1:10000/<account> (Azurite). List its host:port in gateway.artifacts.restricted-hosts.allowed when it is a private address.',
  },
} satisfies Record<string, OptionDef>;

export const azureOptionList: readonly OptionDef[] = Object.values(azureOptions);

/** A credential found in the configuration for one container, with the key it came from (for logs). */
export type ConfiguredSecret = { kind: 'shared-key'; key: string; accountKey: string } | { kind: 'sas'; key: string; sas: string };

function text(config: Configuration, key: string): string | undefined {
  const v = config.value(key);
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
}

/**
 * The configured secret for `container` in `account`, looking under the URI's own host first and
 * then under its .blob./.dfs. twin (so an ABFS-style key serves a wasbs:// URI and vice versa).
 */
export function configuredSecret(config: Configuration, hosts: readonly string[], container: string): ConfiguredSecret | undefined {
  for (const host of hosts) {
    const key = `fs.azure.account.key.${host}`;
    const accountKey = text(config, key);
    if (accountKey) return { kind: 'shared-key', key, accountKey };
  }
  for (const host of hosts) {
    const key = `fs.azure.sas.${container}.${host}`;
    const sas = text(config, key);
    if (sas) return { kind: 'sas', key, sas: sas.replace(/^\?/, '') };
  }
  return undefined;
}

/** The endpoint override for `account`, without a trailing slash, if one is configured. */
export function configuredEndpoint(config: Configuration, account: string): URL | undefined {
  const value = text(config, `fs.azure.account.endpoint.${account}`);
  return value === undefined ? undefined : new URL(value.replace(/\/+$/, ''));
}
