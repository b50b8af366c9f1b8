import { fetchError } from '../../src/plugin-kit';

/** The parts of `s3://bucket/key?versionId=...` (also `s3a://`, `s3p://`). */
export interface S3Location {
  bucket: string;
  /** Percent-decoded, without the leading '/'. */
  key: string;
  /** From `?versionId=`; selects one object version. */
  versionId?: string;
}

// S3's bucket rules, with the legacy us-east-1 names (upper case, '_', up to 255) and short names of self-hosted stores still accepted.
const BUCKET = /^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,253}[A-Za-z0-9])?$/;

/**
 * Parses an S3 URI the way Hadoop S3A does: the authority is the bucket, the path (minus its
 * leading '/') is the key. Throws `GW_FETCH_URI_INVALID` for what no store could serve.
 */
export function parseS3Uri(uri: URL): S3Location {
  if (uri.username || uri.password)
    throw fetchError.invalid(uri, 'S3 URIs carry no credentials; configure s3.access-key / s3.secret-key on the gateway');
  if (uri.port) throw fetchError.invalid(uri, 'an S3 URI names a bucket, not host:port; set s3.endpoint for a custom store');
  const bucket = uri.hostname;
  if (bucket === '') throw fetchError.invalid(uri, 'the bucket is missing (expected s3://<bucket>/<key>)');
  // The bucket becomes part of the host the request is signed for and sent to (virtual-hosted style),
  // so only bucket names S3 itself accepts pass: no percent-escapes, '@', ':' or other host syntax.
  if (!BUCKET.test(bucket) || bucket.includes('..')) {
    throw fetchError.invalid(
      uri,
      `'${bucket}' is not a valid S3 bucket name (letters, digits, '.', '-' and '_', starting and ending with a letter or digit)`,
    );
  }
  let key: string;
  try {
    key = decodeURIComponent(uri.pathname.replace(/^\//, ''));
  } catch {
    throw fetchError.invalid(uri, 'the object key is not valid percent-encoding');
  }
  if (key === '') throw fetchError.invalid(uri, 'the object key is empty (expected s3://<bucket>/<key>)');
  const location: S3Location = { bucket, key };
  const versionId = uri.searchParams.get('versionId');
  if (versionId !== null) {
    if (versionId === '') throw fetchError.invalid(uri, 'versionId is empty');
    location.versionId = versionId;
  }
  return location;
}
