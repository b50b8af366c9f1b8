import { option } from '../../src/plugin-kit';

const section = 'S3 plugin';

/**
 * Options of the S3 plugin (schemes s3, s3a, s3p). Keys are Flink's (`s3.*`) and, for per-bucket
 * overrides, Hadoop S3A's (`fs.s3a.bucket.<bucket>.*`), so one Flink config file serves both.
 */
export const s3Options = {
  accessKey: option({
    key: 's3.access-key',
    type: 'string',
    sensitive: true,
    section,
    description:
      'Access key id used for every bucket without its own keys. Set it together with s3.secret-key; when neither is set, the AWS default credential chain is used (environment, web identity / IRSA, EKS pod identity, ~/.aws profile files, ECS and EC2 instance metadata).',
  }),
  secretKey: option({
    key: 's3.secret-key',
    type: 'string',
    sensitive: true,
    section,
    description: 'Secret access key paired with s3.access-key.',
  }),
  endpoint: option({
    key: 's3.endpoint',
    type: 'url',
    section,
    description:
      'Endpoint of an S3-compatible store, e.g. http://127.0.0.1:9000 (MinIO, Ceph). Unset = AWS S3. A private endpoint must also be listed in gateway.artifacts.restricted-hosts.allowed.',
  }),
  pathStyle: option({
    key: 's3.path.style.access',
    type: 'boolean',
    default: false,
    section,
    description: 'Address buckets as <endpoint>/<bucket>/<key> instead of <bucket>.<endpoint>/<key>; most self-hosted stores need true.',
  }),
  region: option({
    key: 's3.region',
    type: 'string',
    section,
    description:
      "Signing region. Unset: us-east-1 when s3.endpoint is set; otherwise the AWS default region chain (AWS_REGION, profile files), else us-east-1, following S3's redirect to the bucket's own region.",
  }),
  bucketAccessKey: option({
    key: 'fs.s3a.bucket.<bucket>.access.key',
    type: 'string',
    sensitive: true,
    section,
    description: "Access key id for one bucket (Hadoop S3A's per-bucket key); set it together with fs.s3a.bucket.<bucket>.secret.key.",
  }),
  bucketSecretKey: option({
    key: 'fs.s3a.bucket.<bucket>.secret.key',
    type: 'string',
    sensitive: true,
    section,
    description: 'Secret access key for one bucket, paired with fs.s3a.bucket.<bucket>.access.key.',
  }),
  bucketEndpoint: option({
    key: 'fs.s3a.bucket.<bucket>.endpoint',
    type: 'url',
    section,
    description: 'Endpoint for one bucket, overriding s3.endpoint.',
  }),
};
