import { fetchError } from '../../src/plugin-kit';

/** The parts of `gs://bucket/object`. */
export interface GcsLocation {
  bucket: string;
  /** Percent-decoded, without the leading '/'. */
  object: string;
}

// Cloud Storage's bucket names: 3–222 characters of lower-case letters, digits, '-', '_' and '.',
// starting and ending with a letter or digit (63 per dot-separated part, which the store checks).
const BUCKET = /^[a-z0-9](?:[a-z0-9._-]{1,220}[a-z0-9])$/;

/**
 * Parses a gs:// URI as the GCS connector does: the authority is the bucket, the path (minus its
 * leading '/') is the object name. Throws `GW_FETCH_URI_INVALID` for what Cloud Storage could not serve.
 */
export function parseGcsUri(uri: URL): GcsLocation {
  if (uri.username || uri.password) throw fetchError.invalid(uri, 'gs:// URIs carry no credentials; configure fs.gs.auth.* on the gateway');
  if (uri.port)
    throw fetchError.invalid(
      uri,
      'a gs:// URI names a bucket, not host:port; set fs.gs.storage.root.url for an emulator or private endpoint',
    );
  const bucket = uri.hostname;
  if (bucket === '') throw fetchError.invalid(uri, 'the bucket is missing (expected gs://<bucket>/<object>)');
  // Cloud Storage also refuses dotted-decimal IP addresses and names starting with "goog".
  if (!BUCKET.test(bucket) || bucket.includes('..') || /^\d{1,3}(?:\.\d{1,3}){3}$/.test(bucket) || bucket.startsWith('goog')) {
    throw fetchError.invalid(
      uri,
      `'${bucket}' is not a valid Cloud Storage bucket name (lower-case letters, digits, '.', '-' and '_', starting and ending with a letter or digit)`,
    );
  }
  let object: string;
  try {
    object = decodeURIComponent(uri.pathname.replace(/^\//, ''));
  } catch {
    throw fetchError.invalid(uri, 'the object name is not valid percent-encoding');
  }
  if (object === '') throw fetchError.invalid(uri, 'the object name is empty (expected gs://<bucket>/<object>)');
  // Cloud Storage refuses these names itself; refusing them here keeps them out of request paths.
  if (object === '.' || object === '..' || /[\r\n]/.test(object) || Buffer.byteLength(object) > 1024) {
    throw fetchError.invalid(uri, 'the object name is not one Cloud Storage allows (".", "..", a line break, or over 1024 bytes)');
  }
  return { bucket, object };
}
