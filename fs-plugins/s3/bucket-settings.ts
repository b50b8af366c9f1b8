import type { Configuration } from '../../src/plugin-kit';
import { PROVIDER_CLASSES, providerClasses, type ProviderKind } from './provider-classes';
import { configuredBuckets, readS3a, s3a } from './s3a-keys';

/** A role to assume with STS AssumeRole (Hadoop's `fs.s3a.assumed.role.*`). */
export interface AssumedRoleSpec {
  arn: string;
  sessionName: string;
  durationSeconds: number;
  externalId?: string;
  policy?: string;
}

/** One link of a credential chain, as the configuration describes it (no SDK object yet). */
export type CredentialSource =
  | { kind: 'static'; accessKeyId: string; secretAccessKey: string; sessionToken?: string }
  | { kind: 'assumed-role'; role: AssumedRoleSpec; base: CredentialSource[] }
  | { kind: Exclude<ProviderKind, 'static' | 'temporary' | 'assumed-role'> };

/** Where STS calls of a bucket's credentials go (AssumeRole, AssumeRoleWithWebIdentity). */
export interface StsTarget {
  /** undefined = AWS STS of `region`. */
  endpoint?: URL;
  region: string;
}

/** Where and as whom one bucket is read. */
export interface BucketTarget {
  /** Parsed endpoint; undefined = AWS S3. */
  endpoint?: URL;
  /** undefined = AWS default region chain. */
  region?: string;
  forcePathStyle: boolean;
  /** AWS S3 over https (only without an endpoint: an endpoint URL says its scheme). */
  tls: boolean;
  /** Tried in order; `[{ kind: 'default-chain' }]` is the SDK's default chain. */
  credentials: CredentialSource[];
  sts: StsTarget;
}

export const DEFAULT_ROLE_SESSION_NAME = 'flink-jar-gateway';
/** Hadoop's default fs.s3a.assumed.role.session.duration. */
export const DEFAULT_ROLE_DURATION_MS = 30 * 60_000;
const ASSUMED_ROLE_CLASS = 'org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider';

/** An endpoint as Hadoop takes it: a URL, or a bare host[:port] reached over https unless `ssl` is false. */
export function parseEndpointText(text: string, ssl: boolean): URL {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `${ssl ? 'https' : 'http'}://${text}`;
  const url = new URL(withScheme.replace(/\/+$/, ''));
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`must be http:// or https://, not ${url.protocol}//`);
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '')
    throw new Error('must be a plain host[:port] or URL, without user info, query or fragment');
  return url;
}

/**
 * Reads the plugin's options per bucket (checked at start by `s3Rules`): Flink's `s3.*`, Hadoop's
 * `fs.s3a.*` and the per-bucket `fs.s3a.bucket.<bucket>.*`, the bucket's own value first.
 */
export class S3Settings {
  constructor(
    private readonly config: Configuration,
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  forBucket(bucket: string): BucketTarget {
    const ssl = this.bool('ssl', bucket) ?? true;
    const endpointText = this.str('endpoint', bucket);
    const endpoint = endpointText === undefined ? undefined : parseEndpointText(endpointText, ssl);
    const target: BucketTarget = {
      forcePathStyle: this.bool('pathStyle', bucket) ?? false,
      tls: ssl,
      credentials: this.credentials(bucket),
      sts: this.sts(bucket),
    };
    if (endpoint) target.endpoint = endpoint;
    const region = this.str('region', bucket) ?? (endpoint ? 'us-east-1' : undefined);
    if (region !== undefined) target.region = region;
    return target;
  }

  /** The credential chain of `bucket` (undefined: the global one). Exposed for the start-up rules. */
  credentials(bucket?: string): CredentialSource[] {
    const classes = this.providerList('provider', bucket);
    if (classes !== undefined) return this.chain(classes, bucket);
    const role = this.role(bucket);
    if (role !== undefined) return [{ kind: 'assumed-role', role, base: this.roleBase(bucket) }];
    const pair = this.staticPair(bucket);
    return pair ? [pair] : [{ kind: 'default-chain' }];
  }

  /** The role `bucket` would assume (undefined: none configured). */
  role(bucket?: string): AssumedRoleSpec | undefined {
    const arn = this.str('roleArn', bucket);
    if (arn === undefined) return undefined;
    const duration = readS3a(this.config, s3a.roleDuration, bucket)?.value;
    const spec: AssumedRoleSpec = {
      arn,
      sessionName: this.str('roleSessionName', bucket) ?? DEFAULT_ROLE_SESSION_NAME,
      durationSeconds: Math.floor((typeof duration === 'number' ? duration : DEFAULT_ROLE_DURATION_MS) / 1000),
    };
    const externalId = this.str('roleExternalId', bucket);
    if (externalId !== undefined) spec.externalId = externalId;
    const policy = this.str('rolePolicy', bucket);
    if (policy !== undefined) spec.policy = policy;
    return spec;
  }

  /** The class names of a provider list (undefined: unset). */
  providerList(name: 'provider' | 'roleBaseProvider', bucket?: string): string[] | undefined {
    const text = this.str(name, bucket);
    return text === undefined ? undefined : providerClasses(text);
  }

  /** Whether the provider list of `bucket` (set or not) would assume `fs.s3a.assumed.role.arn`. */
  usesRole(bucket?: string): boolean {
    const classes = this.providerList('provider', bucket);
    return classes === undefined ? this.str('roleArn', bucket) !== undefined : classes.includes(ASSUMED_ROLE_CLASS);
  }

  private chain(classes: string[], bucket: string | undefined): CredentialSource[] {
    const out: CredentialSource[] = [];
    for (const className of classes) {
      const kind = PROVIDER_CLASSES[className];
      if (kind === undefined) continue; // refused at start-up by s3Rules
      if (kind === 'static' || kind === 'temporary') {
        // As Hadoop's providers do: without keys in this scope the link yields nothing and the next one is tried.
        const pair = this.staticPair(bucket);
        if (pair && (kind === 'static' || pair.sessionToken !== undefined)) out.push(pair);
      } else if (kind === 'assumed-role') {
        const role = this.role(bucket);
        if (role) out.push({ kind, role, base: this.roleBase(bucket) });
      } else out.push({ kind });
    }
    return out;
  }

  /** What signs AssumeRole: its own provider list, else the static keys, else the default chain. */
  private roleBase(bucket: string | undefined): CredentialSource[] {
    const classes = this.providerList('roleBaseProvider', bucket);
    if (classes !== undefined)
      return this.chain(
        classes.filter((c) => PROVIDER_CLASSES[c] !== 'assumed-role'),
        bucket,
      );
    const pair = this.staticPair(bucket);
    return pair ? [pair] : [{ kind: 'default-chain' }];
  }

  /**
   * The key pair of the most specific scope that has an access key: the bucket's, Hadoop's global,
   * then Flink's. A scope's pair is taken as a whole: mixing halves would sign with a secret that
   * does not belong to the key id.
   */
  staticPair(bucket?: string): Extract<CredentialSource, { kind: 'static' }> | undefined {
    const scopes: [string, string, string][] = [
      ...(bucket !== undefined
        ? [
            [`fs.s3a.bucket.${bucket}.access.key`, `fs.s3a.bucket.${bucket}.secret.key`, `fs.s3a.bucket.${bucket}.session.token`] as [
              string,
              string,
              string,
            ],
          ]
        : []),
      ['fs.s3a.access.key', 'fs.s3a.secret.key', 'fs.s3a.session.token'],
      ['s3.access-key', 's3.secret-key', 's3.session.token'],
    ];
    for (const [access, secret, token] of scopes) {
      const accessKeyId = this.text(access);
      const secretAccessKey = this.text(secret);
      if (accessKeyId === undefined || secretAccessKey === undefined) continue;
      const sessionToken = this.text(token) ?? this.str('sessionToken', bucket);
      return { kind: 'static', accessKeyId, secretAccessKey, ...(sessionToken !== undefined ? { sessionToken } : {}) };
    }
    return undefined;
  }

  private sts(bucket: string): StsTarget {
    const endpointText = this.str('stsEndpoint', bucket);
    const region = this.str('stsRegion', bucket) ?? nonEmpty(this.env.AWS_REGION) ?? nonEmpty(this.env.AWS_DEFAULT_REGION) ?? 'us-east-1';
    return endpointText === undefined ? { region } : { endpoint: parseEndpointText(endpointText, true), region };
  }

  private str(name: keyof typeof s3a, bucket?: string): string | undefined {
    const v = readS3a(this.config, s3a[name], bucket)?.value;
    return v === undefined ? undefined : nonEmpty(String(v));
  }

  private bool(name: keyof typeof s3a, bucket?: string): boolean | undefined {
    const v = readS3a(this.config, s3a[name], bucket)?.value;
    return typeof v === 'boolean' ? v : undefined;
  }

  private text(key: string): string | undefined {
    return nonEmpty(this.config.value(key));
  }

  /** Every scope with settings of its own: the global one (undefined) and each configured bucket. */
  scopes(): (string | undefined)[] {
    return [undefined, ...configuredBuckets(this.config)];
  }
}

function nonEmpty(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = String(value).trim();
  return text === '' ? undefined : text;
}
