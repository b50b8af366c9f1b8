import { option, type ConfigRule, type Configuration, type OptionDef } from '../../src/artifacts/plugin-kit';

const section = 'S3 plugin';

/**
 * Options of the S3 plugin (schemes s3, s3a, s3p). Keys are Flink's (`s3.*`) and, for per-bucket
 * overrides, Hadoop S3A's (`fs.s3a.bucket.<bucket>.*`), so one Flink config file serves both.
 */
export const s3Options = {
  accessKey: option({
    key: 's3.access-key', type: 'string', sensitive: true, section,
    description: 'Access key id used for every bucket without its own keys. Set it together with s3.secret-key; when neither is set, the AWS default credential chain is used (environment, web identity / IRSA, EKS pod identity, ~/.aws profile files, ECS and EC2 instance metadata).',
  }),
  secretKey: option({
    key: 's3.secret-key', type: 'string', sensitive: true, section,
    description: 'Secret access key paired with s3.access-key.',
  }),
  endpoint: option({
    key: 's3.endpoint', type: 'url', section,
    description: 'Endpoint of an S3-compatible store, e.g. http://127.0.0.1:9000 (MinIO, Ceph). Unset = AWS S3. A private endpoint must also be listed in gateway.artifacts.restricted-hosts.allowed.',
  }),
  pathStyle: option({
    key: 's3.path.style.access', type: 'boolean', default: false, section,
    description: 'Address buckets as <endpoint>/<bucket>/<key> instead of <bucket>.<endpoint>/<key>; most self-hosted stores need true.',
  }),
  region: option({
    key: 's3.region', type: 'string', section,
    description: 'Signing region. Unset: us-east-1 when s3.endpoint is set; otherwise the AWS default region chain (AWS_REGION, profile files), else us-east-1, following S3\'s redirect to the bucket\'s own region.',
  }),
  bucketAccessKey: option({
    key: 'fs.s3a.bucket.<bucket>.access.key', type: 'string', sensitive: true, section,
    description: 'Access key id for one bucket (Hadoop S3A\'s per-bucket key); set it together with fs.s3a.bucket.<bucket>.secret.key.',
  }),
  bucketSecretKey: option({
    key: 'fs.s3a.bucket.<bucket>.secret.key', type: 'string', sensitive: true, section,
    description: 'Secret access key for one bucket, paired with fs.s3a.bucket.<bucket>.access.key.',
  }),
  bucketEndpoint: option({
    key: 'fs.s3a.bucket.<bucket>.endpoint', type: 'url', section,
    description: 'Endpoint for one bucket, overriding s3.endpoint.',
  }),
};

const BUCKET_KEY = /^fs\.s3a\.bucket\.(.+)\.(access\.key|secret\.key|endpoint)$/;

/** Whether `key` of `config` holds a non-blank value. */
const isSet = (config: Configuration, key: string) => nonEmpty(config.value(key)) !== undefined;

/**
 * The key pairs go together, globally and per bucket: a lone access key id would be signed with
 * another pair's secret (or silently fall back to the default chain).
 */
export const s3Rules: readonly ConfigRule[] = [
  {
    keys: [s3Options.accessKey.key, s3Options.secretKey.key, s3Options.bucketAccessKey.key, s3Options.bucketSecretKey.key],
    description: 'each access key is set together with its secret key (globally and per bucket), or neither.',
    check(config) {
      const pairs: [string, string][] = [[s3Options.accessKey.key, s3Options.secretKey.key]];
      const buckets = new Set(config.keys().map((k) => BUCKET_KEY.exec(k)?.[1]).filter((b): b is string => b !== undefined));
      for (const b of buckets) pairs.push([`fs.s3a.bucket.${b}.access.key`, `fs.s3a.bucket.${b}.secret.key`]);
      return pairs
        .filter(([access, secret]) => isSet(config, access) !== isSet(config, secret))
        .map(([access, secret]) => ({ key: isSet(config, access) ? secret : access, message: `set both ${access} and ${secret}, or neither` }));
    },
  },
];

export interface StaticCredentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/** Where and as whom one bucket is read. */
export interface BucketTarget {
  /** Parsed endpoint; undefined = AWS S3. */
  endpoint?: URL;
  /** undefined = AWS default region chain. */
  region?: string;
  forcePathStyle: boolean;
  /** undefined = AWS default credential chain. */
  credentials?: StaticCredentials;
}

interface BucketOverride {
  accessKey?: string;
  secretKey?: string;
  endpoint?: string;
}

/** Reads the plugin's options once (checked by the registry: url types, `s3Rules`); `forBucket` answers per bucket. */
export class S3Settings {
  private readonly global: BucketOverride;
  private readonly buckets = new Map<string, BucketOverride>();
  private readonly pathStyle: boolean;
  private readonly region: string | undefined;

  constructor(config: Configuration) {
    const str = (def: OptionDef<'string'> | OptionDef<'url'>) => nonEmpty(config.value(def.key) ?? def.default);
    this.global = { accessKey: str(s3Options.accessKey), secretKey: str(s3Options.secretKey), endpoint: str(s3Options.endpoint) };
    this.pathStyle = config.get(s3Options.pathStyle);
    this.region = str(s3Options.region);
    for (const key of config.keys()) {
      const m = BUCKET_KEY.exec(key);
      if (!m) continue;
      const entry = this.buckets.get(m[1]!) ?? {};
      const value = nonEmpty(config.value(key));
      if (m[2] === 'access.key') entry.accessKey = value;
      else if (m[2] === 'secret.key') entry.secretKey = value;
      else entry.endpoint = value;
      this.buckets.set(m[1]!, entry);
    }
  }

  forBucket(bucket: string): BucketTarget {
    const own = this.buckets.get(bucket);
    // A bucket's key pair replaces the global pair as a whole: mixing halves would sign with a
    // secret that does not belong to the key id.
    const pair = own?.accessKey !== undefined ? own : this.global;
    const endpointText = own?.endpoint ?? this.global.endpoint;
    const endpoint = endpointText === undefined ? undefined : new URL(endpointText);
    const target: BucketTarget = { forcePathStyle: this.pathStyle };
    if (endpoint) target.endpoint = endpoint;
    const region = this.region ?? (endpoint ? 'us-east-1' : undefined);
    if (region !== undefined) target.region = region;
    if (pair.accessKey !== undefined && pair.secretKey !== undefined) {
      target.credentials = { accessKeyId: pair.accessKey, secretAccessKey: pair.secretKey };
    }
    return target;
  }
}

function nonEmpty(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = String(value).trim();
  return text === '' ? undefined : text;
}
