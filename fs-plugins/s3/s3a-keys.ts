import type { Configuration, OptionDef } from '../../src/plugin-kit';

const section = 'S3 plugin';

type KeyType = 'string' | 'boolean' | 'duration';

/**
 * One Hadoop S3A setting in its three spellings: Flink's `s3.<suffix>` (Flink's S3 filesystems hand
 * every `s3.*` key to S3A as `fs.s3a.*`), Hadoop's `fs.s3a.<suffix>`, and Hadoop's per-bucket
 * `fs.s3a.bucket.<bucket>.<suffix>`. A bucket's own key wins, then `fs.s3a.`, then `s3.`.
 */
export interface S3aSetting {
  suffix: string;
  /** The Flink spellings, in precedence order (the first set one wins among them). */
  flinkKeys: readonly string[];
  /** The declared options for the spellings this plugin did not already declare elsewhere. */
  defs: OptionDef[];
}

interface SettingSpec {
  suffix: string;
  type: KeyType;
  description: string;
  sensitive?: boolean;
  /** Flink spellings; default `s3.<suffix>`. */
  flinkKeys?: readonly string[];
  /** Spellings declared elsewhere (the plugin's older options), not declared again here. */
  declaredElsewhere?: readonly string[];
  min?: number;
  max?: number;
}

function s3aSetting(spec: SettingSpec): S3aSetting {
  const flinkKeys = spec.flinkKeys ?? [`s3.${spec.suffix}`];
  const elsewhere = new Set(spec.declaredElsewhere ?? []);
  const bucketKey = `fs.s3a.bucket.<bucket>.${spec.suffix}`;
  const keys = [...flinkKeys, `fs.s3a.${spec.suffix}`, bucketKey].filter((k) => !elsewhere.has(k));
  const defs = keys.map((key): OptionDef => {
    const perBucket = key === bucketKey;
    const description = perBucket
      ? `Per-bucket form of fs.s3a.${spec.suffix} (Hadoop S3A): applies to s3://<bucket>/ only and wins over the global keys.`
      : key.startsWith('fs.s3a.')
        ? `${spec.description} Hadoop's spelling; a bucket's own fs.s3a.bucket.<bucket>.${spec.suffix} wins over it, and it wins over ${flinkKeys.join(' / ')}.`
        : key === flinkKeys[0]
          ? `${spec.description} Flink's spelling of fs.s3a.${spec.suffix}.`
          : `Older spelling of ${flinkKeys[0]}.`;
    return {
      key,
      type: spec.type,
      section,
      description,
      ...(spec.sensitive ? { sensitive: true } : {}),
      ...(spec.min !== undefined ? { min: spec.min } : {}),
      ...(spec.max !== undefined ? { max: spec.max } : {}),
    } as OptionDef;
  });
  return { suffix: spec.suffix, flinkKeys, defs };
}

/** The S3A settings the plugin reads besides its original `s3.*` options. */
export const s3a = {
  accessKey: s3aSetting({
    suffix: 'access.key',
    type: 'string',
    sensitive: true,
    flinkKeys: ['s3.access-key'],
    declaredElsewhere: ['s3.access-key', 'fs.s3a.bucket.<bucket>.access.key'],
    description: "Access key id (static credentials, Hadoop's SimpleAWSCredentialsProvider).",
  }),
  secretKey: s3aSetting({
    suffix: 'secret.key',
    type: 'string',
    sensitive: true,
    flinkKeys: ['s3.secret-key'],
    declaredElsewhere: ['s3.secret-key', 'fs.s3a.bucket.<bucket>.secret.key'],
    description: 'Secret access key paired with the access key id.',
  }),
  sessionToken: s3aSetting({
    suffix: 'session.token',
    type: 'string',
    sensitive: true,
    description: "Session token that goes with a temporary access key pair (Hadoop's TemporaryAWSCredentialsProvider).",
  }),
  endpoint: s3aSetting({
    suffix: 'endpoint',
    type: 'string',
    declaredElsewhere: ['s3.endpoint', 'fs.s3a.bucket.<bucket>.endpoint'],
    description:
      'Endpoint of the store: a URL, or a bare host[:port] as Hadoop allows (https unless fs.s3a.connection.ssl.enabled is false).',
  }),
  pathStyle: s3aSetting({
    suffix: 'path.style.access',
    type: 'boolean',
    declaredElsewhere: ['s3.path.style.access'],
    description: 'Path-style addressing (<endpoint>/<bucket>/<key>).',
  }),
  region: s3aSetting({
    suffix: 'endpoint.region',
    type: 'string',
    flinkKeys: ['s3.endpoint.region', 's3.region'],
    declaredElsewhere: ['s3.region'],
    description: 'Signing region of the S3 endpoint (SigV4 credential scope).',
  }),
  ssl: s3aSetting({
    suffix: 'connection.ssl.enabled',
    type: 'boolean',
    description:
      "Whether an endpoint given without a scheme (and AWS S3 itself) is reached over https (default true). An endpoint URL's own scheme wins, with a start-up warning when they disagree.",
  }),
  provider: s3aSetting({
    suffix: 'aws.credentials.provider',
    type: 'string',
    description:
      "Comma-separated Java class names of AWS credential providers, tried in order, each mapped to the AWS SDK for JavaScript's provider that does the same " +
      '(the list is in the README\'s "Remote jars" section). A class with no counterpart fails start-up naming this key. ' +
      'Unset: static keys when set, else an assumed role when fs.s3a.assumed.role.arn is set, else the AWS default credential chain.',
  }),
  roleArn: s3aSetting({
    suffix: 'assumed.role.arn',
    type: 'string',
    description:
      "IAM role to assume with STS AssumeRole for reading (Hadoop's AssumedRoleCredentialProvider). Used when the provider list names " +
      'org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider, or is unset; the base credentials come from fs.s3a.assumed.role.credentials.provider.',
  }),
  roleSessionName: s3aSetting({
    suffix: 'assumed.role.session.name',
    type: 'string',
    description: 'RoleSessionName of the assumed role (shows in CloudTrail). Default flink-jar-gateway.',
  }),
  roleDuration: s3aSetting({
    suffix: 'assumed.role.session.duration',
    type: 'duration',
    min: 900_000,
    max: 43_200_000,
    description:
      "DurationSeconds of the assumed-role session (15 min to 12 h, at most the role's maximum session duration). Default 30 min, as Hadoop; it is renewed 5 min before it ends.",
  }),
  roleExternalId: s3aSetting({
    suffix: 'assumed.role.external.id',
    type: 'string',
    sensitive: true,
    description: 'ExternalId sent with AssumeRole, for roles whose trust policy requires one (sts:ExternalId).',
  }),
  rolePolicy: s3aSetting({
    suffix: 'assumed.role.policy',
    type: 'string',
    description: "A JSON session policy sent with AssumeRole, narrowing the role's permissions for the session.",
  }),
  stsEndpoint: s3aSetting({
    suffix: 'assumed.role.sts.endpoint',
    type: 'string',
    description:
      'STS endpoint for AssumeRole and AssumeRoleWithWebIdentity (URL or bare host, https unless it is a URL that says otherwise). Default: STS of the region below. A private endpoint must be listed in gateway.artifacts.restricted-hosts.allowed.',
  }),
  stsRegion: s3aSetting({
    suffix: 'assumed.role.sts.endpoint.region',
    type: 'string',
    description: 'Signing region of the STS endpoint. Default: AWS_REGION, else us-east-1.',
  }),
  roleBaseProvider: s3aSetting({
    suffix: 'assumed.role.credentials.provider',
    type: 'string',
    description:
      'Credential providers (Java class names, as fs.s3a.aws.credentials.provider) that sign the STS AssumeRole call. Unset: the static keys when set, ' +
      'else the AWS default credential chain (environment, web identity token file / IRSA, EKS pod identity, profile, instance role).',
  }),
};

export type S3aName = keyof typeof s3a;

/** Every option the settings above declare. */
export function s3aOptionDefs(): OptionDef[] {
  return Object.values(s3a).flatMap((s) => s.defs);
}

/**
 * The options with the per-bucket templates last, longest first: the registry takes the first
 * template that matches, and `fs.s3a.bucket.b.assumed.role.sts.endpoint` must not be read as the
 * `….endpoint` of a bucket named `b.assumed.role.sts`.
 */
export function templatesLongestFirst(defs: readonly OptionDef[]): OptionDef[] {
  const templates = defs.filter((d) => d.key.includes('<')).sort((a, b) => b.key.length - a.key.length);
  return [...defs.filter((d) => !d.key.includes('<')), ...templates];
}

/** Every per-bucket suffix the plugin knows, longest first, for telling a bucket name from a suffix. */
export const BUCKET_SUFFIXES: readonly string[] = Object.values(s3a)
  .map((s) => s.suffix)
  .sort((a, b) => b.length - a.length);

/** The bucket a `fs.s3a.bucket.<bucket>.<known suffix>` key names, with the suffix; undefined for any other key. */
export function bucketKey(key: string): { bucket: string; suffix: string } | undefined {
  if (!key.startsWith('fs.s3a.bucket.')) return undefined;
  const rest = key.slice('fs.s3a.bucket.'.length);
  for (const suffix of BUCKET_SUFFIXES) {
    if (rest.endsWith(`.${suffix}`) && rest.length > suffix.length + 1) return { bucket: rest.slice(0, -suffix.length - 1), suffix };
  }
  return undefined;
}

/** A setting's value for `bucket` (undefined: for no bucket, the global value) and the key it came from. */
export function readS3a(config: Configuration, setting: S3aSetting, bucket?: string): { key: string; value: unknown } | undefined {
  const keys = [
    ...(bucket !== undefined ? [`fs.s3a.bucket.${bucket}.${setting.suffix}`] : []),
    `fs.s3a.${setting.suffix}`,
    ...setting.flinkKeys,
  ];
  for (const key of keys) {
    const value = config.value(key);
    if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) continue;
    return { key, value: typeof value === 'string' ? value.trim() : value };
  }
  return undefined;
}

/** Every bucket that has at least one per-bucket key. */
export function configuredBuckets(config: Configuration): string[] {
  return [
    ...new Set(
      config
        .keys()
        .map((k) => bucketKey(k)?.bucket)
        .filter((b): b is string => b !== undefined),
    ),
  ];
}
