import type { ConfigRule, Configuration } from '../../src/plugin-kit';
import { parseEndpointText, S3Settings } from './bucket-settings';
import { PROVIDER_CLASSES, unsupportedProvider } from './provider-classes';
import { bucketKey, configuredBuckets, readS3a, s3a } from './s3a-keys';
import { s3Options } from './options';

type Finding = { key: string; message: string };

/** Whether `key` of `config` holds a non-blank value. */
const isSet = (config: Configuration, key: string) => {
  const v = config.value(key);
  return v !== undefined && v !== null && String(v).trim() !== '';
};

/** The key a setting was read from for a scope, for naming it in a message. */
const keyOf = (config: Configuration, name: keyof typeof s3a, bucket?: string) =>
  readS3a(config, s3a[name], bucket)?.key ??
  (bucket === undefined ? `fs.s3a.${s3a[name].suffix}` : `fs.s3a.bucket.${bucket}.${s3a[name].suffix}`);

const scopeName = (bucket?: string) => (bucket === undefined ? 'the global settings' : `bucket ${bucket}`);

/** Hadoop S3A keys that change how S3 is reached or read, which the gateway recognises but does not act on. */
const UNSUPPORTED_S3A: readonly [RegExp, string][] = [
  [
    /^(?:fs\.s3a\.|s3\.)(?:bucket\..+\.)?proxy\./,
    'the gateway connects to S3 directly; use the HTTPS_PROXY environment of the process if one is needed',
  ],
  [
    /^(?:fs\.s3a\.|s3\.)(?:bucket\..+\.)?(?:encryption\.(?:algorithm|key)|server-side-encryption[.-](?:algorithm|key))$/,
    'objects encrypted with a customer key (SSE-C) cannot be read by the gateway; SSE-S3 and SSE-KMS need no setting',
  ],
  [
    /^(?:fs\.s3a\.|s3\.)(?:bucket\..+\.)?(?:signing-algorithm|custom\.signers|s3\.signing-algorithm)$/,
    'the gateway always signs with SigV4',
  ],
  [/^(?:fs\.s3a\.|s3\.)(?:bucket\..+\.)?requester\.pays\.enabled$/, 'requester-pays buckets are not supported'],
  [
    /^(?:fs\.s3a\.|s3\.)(?:bucket\..+\.)?endpoint\.fips$/,
    'FIPS endpoints are not selected by this key; set fs.s3a.endpoint to the FIPS endpoint instead',
  ],
  [
    /^(?:fs\.s3a\.|s3\.)(?:bucket\..+\.)?delegation\.token\.binding$/,
    "S3A delegation tokens are not used for the fetch; the gateway's own s3 token provider issues job credentials",
  ],
  [/^fs\.s3a\.bucket\..+\.accesspoint\.arn$/, 'S3 access points are not supported'],
];

/** The start-up rules of the S3 plugin's credential settings; errors name the key to change. */
export const s3Rules: readonly ConfigRule[] = [
  {
    keys: [
      s3Options.accessKey.key,
      s3Options.secretKey.key,
      s3Options.bucketAccessKey.key,
      s3Options.bucketSecretKey.key,
      'fs.s3a.access.key',
      'fs.s3a.secret.key',
    ],
    description: "each access key is set together with its secret key (Flink's, Hadoop's global and per bucket), or neither.",
    check(config) {
      const pairs: [string, string][] = [
        [s3Options.accessKey.key, s3Options.secretKey.key],
        ['fs.s3a.access.key', 'fs.s3a.secret.key'],
      ];
      for (const b of configuredBuckets(config)) pairs.push([`fs.s3a.bucket.${b}.access.key`, `fs.s3a.bucket.${b}.secret.key`]);
      return pairs
        .filter(([access, secret]) => isSet(config, access) !== isSet(config, secret))
        .map(([access, secret]) => ({
          key: isSet(config, access) ? secret : access,
          message: `set both ${access} and ${secret}, or neither`,
        }));
    },
  },
  {
    keys: [...s3a.provider.defs.map((d) => d.key), ...s3a.roleBaseProvider.defs.map((d) => d.key), ...s3a.roleArn.defs.map((d) => d.key)],
    description:
      'every credential provider class named has a counterpart in the AWS SDK for JavaScript; AssumedRoleCredentialProvider has a role ARN; ' +
      "the assumed role's own providers do not assume a role again; a provider list yields at least one provider.",
    check(config) {
      const out: Finding[] = [];
      for (const key of config.keys()) {
        const suffix = bucketKey(key)?.suffix ?? key.replace(/^fs\.s3a\.|^s3\./, '');
        if (suffix !== s3a.provider.suffix && suffix !== s3a.roleBaseProvider.suffix) continue;
        for (const className of String(config.value(key))
          .split(/[,\s]+/)
          .filter(Boolean)) {
          const problem = unsupportedProvider(className);
          if (problem !== undefined) out.push({ key, message: problem });
          else if (suffix === s3a.roleBaseProvider.suffix && PROVIDER_CLASSES[className] === 'assumed-role') {
            out.push({
              key,
              message: `names ${className}: the credentials that sign AssumeRole cannot themselves be an assumed role of this key set`,
            });
          }
        }
      }
      if (out.length > 0) return out;
      const settings = new S3Settings(config, {});
      for (const bucket of settings.scopes()) {
        const classes = settings.providerList('provider', bucket);
        if (classes?.some((c) => PROVIDER_CLASSES[c] === 'assumed-role') && settings.role(bucket) === undefined) {
          out.push({
            key: keyOf(config, 'roleArn', bucket),
            message: `is unset, but ${keyOf(config, 'provider', bucket)} names AssumedRoleCredentialProvider (${scopeName(bucket)})`,
          });
        } else if (classes !== undefined && settings.credentials(bucket).length === 0) {
          out.push({
            key: keyOf(config, 'provider', bucket),
            message: `yields no credentials for ${scopeName(bucket)}: the static-key providers it names have no access key set`,
          });
        }
      }
      return out;
    },
  },
  {
    keys: [...s3a.endpoint.defs.map((d) => d.key), ...s3a.stsEndpoint.defs.map((d) => d.key)],
    description: "an endpoint given as a bare host[:port] (Hadoop's form) or URL is a valid http(s) address.",
    check(config) {
      const out: Finding[] = [];
      // s3.endpoint and the per-bucket endpoint are `url` options, checked by the registry itself.
      const global = new Set(['fs.s3a.endpoint', ...s3a.stsEndpoint.defs.map((d) => d.key).filter((k) => !k.includes('<'))]);
      for (const key of config.keys()) {
        if (!global.has(key) && bucketKey(key)?.suffix !== s3a.stsEndpoint.suffix) continue;
        try {
          parseEndpointText(String(config.value(key)), true);
        } catch (err) {
          out.push({ key, message: `'${String(config.value(key))}' is not an endpoint: ${(err as Error).message}` });
        }
      }
      return out;
    },
  },
];

/** Start-up warnings: keys the gateway recognises and does not act on, each named (never silently ignored). */
export const s3Warnings: readonly ConfigRule[] = [
  {
    keys: [],
    severity: 'warning',
    description:
      'a Hadoop S3A key that changes how S3 is reached or read but that the gateway does not act on (proxy, SSE-C, signer, requester pays, FIPS, ' +
      'S3A delegation tokens, access points); an assumed-role ARN that the configured provider list does not use; a connection.ssl.enabled that ' +
      "an endpoint URL's scheme overrides.",
    check(config) {
      const out: Finding[] = [];
      for (const key of config.keys()) {
        const hit = UNSUPPORTED_S3A.find(([re]) => re.test(key));
        if (hit) out.push({ key, message: `recognised S3A key, not supported by the gateway's fetch and ignored: ${hit[1]}` });
      }
      const settings = new S3Settings(config, {});
      for (const bucket of settings.scopes()) {
        const arn = readS3a(config, s3a.roleArn, bucket);
        if (arn !== undefined && (bucket === undefined || arn.key.startsWith('fs.s3a.bucket.')) && !settings.usesRole(bucket)) {
          out.push({
            key: arn.key,
            message: `ignored for ${scopeName(bucket)}, as Hadoop does: ${keyOf(config, 'provider', bucket)} does not name org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider`,
          });
        }
        const ssl = readS3a(config, s3a.ssl, bucket);
        const endpoint = readS3a(config, s3a.endpoint, bucket);
        if (ssl !== undefined && endpoint !== undefined && /^https?:\/\//i.test(String(endpoint.value))) {
          const https = /^https:/i.test(String(endpoint.value));
          if (https !== ssl.value)
            out.push({
              key: ssl.key,
              message: `is ${String(ssl.value)}, but ${endpoint.key} says ${https ? 'https' : 'http'}://, which wins (as in Hadoop)`,
            });
        }
      }
      return out;
    },
  },
];
