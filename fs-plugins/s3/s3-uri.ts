import { fetchError } from '../../src/artifacts/fetch-error';

/** The parts of `s3://bucket/key?versionId=...` (also `s3a://`, `s3p://`). */
export interface S3Location {
  bucket: string;
  /** Percent-decoded, without the leading '/'. */
  key: string;
  /** From `?versionId=`; selects one object version. */
  versionId?: string;
}

/**
 * Parses an S3 URI the way Hadoop S3A does: the authority is the bucket, the path (minus its
 * leading '/') is the key. Throws `GW_FETCH_URI_INVALID` for what no store could serve.
 */
export function parseS3Uri(uri: URL): S3Location {
  if (uri.username || uri.password) throw fetchError.invalid(uri, 'S3 URIs carry no credentials; configure s3.access-key / s3.secret-key on the gateway');
  if (uri.port) throw fetchError.invalid(uri, 'an S3 URI names a bucket, not host:port; set s3.endpoint for a custom store');
  const bucket = uri.hostname;
  if (bucket === '') throw fetchError.invalid(uri, 'the bucket is missing (expected s3://<bucket>/<key>)');
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
