import { fetchError } from '../../src/plugin-kit';

/** Where one wasbs/wasb/abfss/abfs URI points. */
export interface AzureBlobLocation {
  /** Storage account: the first label of the URI's host. */
  account: string;
  container: string;
  /** Blob name, decoded (`dir/app.jar`). */
  blobName: string;
  /** The host as written in the URI, lower-cased (`acct.dfs.core.windows.net`). */
  uriHost: string;
  /** The Blob service host (`acct.blob.core.windows.net`): `.dfs.` replaced by `.blob.`. */
  blobHost: string;
  /** Explicit port in the URI, if any. */
  port?: number;
}

// Azure's container rules: 3–63 characters, lower-case letters, digits and single hyphens, starting
// and ending with a letter or digit; `$root` is the account's root container (WASB uses it).
const CONTAINER = /^(?:\$root|[a-z0-9](?:[a-z0-9]|-(?!-)){1,61}[a-z0-9])$/;

const EXAMPLE = 'wasbs://<container>@<account>.blob.core.windows.net/<path>';

/**
 * Parses `wasbs://container@account.blob.core.windows.net/path/app.jar` (and `wasb://`,
 * `abfss://container@account.dfs.core.windows.net/...`, `abfs://`). ABFS URIs are served from the
 * account's Blob endpoint: a jar is a blob either way, and the Blob API needs no hierarchical namespace.
 * Other clouds (`.blob.core.chinacloudapi.cn`, `.blob.core.usgovcloudapi.net`, ...) are handled the same way.
 */
export function parseAzureUri(uri: URL): AzureBlobLocation {
  const host = uri.hostname.toLowerCase();
  const container = decodeURIComponent(uri.username);
  if (!container) throw fetchError.invalid(uri, `name the container before '@', as in ${EXAMPLE}`);
  if (uri.password) throw fetchError.invalid(uri, `put no password or key into the URI; configure fs.azure.account.key.${host} instead`);
  if (!CONTAINER.test(container)) {
    throw fetchError.invalid(uri, `'${container}' is not a valid container name (3-63 lower-case letters, digits and single hyphens)`);
  }
  const labels = host.split('.');
  const account = labels[0] ?? '';
  if (labels.length < 2 || account === '') throw fetchError.invalid(uri, `the host must be the account's endpoint, as in ${EXAMPLE}`);
  let blobName: string;
  try {
    blobName = decodeURIComponent(uri.pathname.replace(/^\/+/, ''));
  } catch {
    throw fetchError.invalid(uri, 'the path is not valid percent-encoding');
  }
  if (blobName === '' || blobName.endsWith('/')) throw fetchError.invalid(uri, `the path must name a blob, as in ${EXAMPLE}`);
  const location: AzureBlobLocation = {
    account,
    container,
    blobName,
    uriHost: host,
    blobHost: host.replace('.dfs.', '.blob.'),
  };
  if (uri.port !== '') location.port = Number(uri.port);
  return location;
}

/**
 * Azure Storage's own host names for an account: `<account>.<blob|dfs>.<cloud suffix>` in the public,
 * China and US Government clouds (and the retired German one), and Azure DNS zone endpoints
 * (`<account>.z<NN>.<blob|dfs>.storage.azure.net`). Account names are 3–24 lower-case letters and digits.
 */
const AZURE_STORAGE_HOST =
  /^[a-z0-9]{3,24}\.(?:(?:blob|dfs)\.core\.(?:windows\.net|chinacloudapi\.cn|usgovcloudapi\.net|cloudapi\.de)|z\d{2}\.(?:blob|dfs)\.storage\.azure\.net)$/;

/** Whether `host` is one of Azure Storage's own endpoints, so that the cluster's Azure credentials may go there. */
export function isAzureStorageHost(host: string): boolean {
  return AZURE_STORAGE_HOST.test(host.toLowerCase().replace(/\.$/, ''));
}

/** The hosts under which credentials for `location` may be configured: the URI's host first, then its twin. */
export function credentialHosts(location: AzureBlobLocation): string[] {
  const twin = location.uriHost.includes('.blob.') ? location.uriHost.replace('.blob.', '.dfs.') : location.blobHost;
  return twin === location.uriHost ? [location.uriHost] : [location.uriHost, twin];
}

/** The account's default Blob endpoint: always https, like ABFS's `fs.azure.always.use.https` default. */
export function defaultBlobEndpoint(location: AzureBlobLocation): URL {
  return new URL(`https://${location.blobHost}${location.port === undefined ? '' : `:${location.port}`}`);
}
