import type { FsPluginDefinition } from '../../src/plugin-kit';
import { S3Settings } from './bucket-settings';
import { s3Options } from './options';
import { s3Rules, s3Warnings } from './rules';
import { s3aOptionDefs, templatesLongestFirst } from './s3a-keys';
import { S3FileSystem } from './s3-file-system';
import { s3TokenProvider } from './token-provider';

export { S3FileSystem } from './s3-file-system';
export { s3Options } from './options';
export { S3_JOB_ROLE_ARN_KEY, S3DelegationTokenProvider, s3ProviderOptions, type S3Tokens } from './token-provider';

/**
 * S3 and S3-compatible stores for `s3://bucket/key`, `s3a://` and `s3p://` (Flink's and Hadoop's
 * names for the same thing); `?versionId=` pins an object version.
 *
 * Credentials, per bucket, from Flink's and Hadoop's keys (`s3.*`, `fs.s3a.*`, `fs.s3a.bucket.<bucket>.*`):
 * static keys; a provider list (`fs.s3a.aws.credentials.provider`, Java class names mapped to the
 * AWS SDK's providers, provider-classes.ts); an assumed role (`fs.s3a.assumed.role.*`, STS AssumeRole
 * signed with static keys, a web identity token file (EKS IRSA) or the default chain). With none of
 * these, the AWS SDK's default credential chain: environment, web identity, EKS pod identity and ECS
 * container credentials, SSO and ~/.aws profile files, and EC2 instance metadata.
 *
 * Option values are checked by the options registry (`s3Rules`, the `url` type of the endpoints):
 * a half key pair or a malformed endpoint fails start-up with `GW_CONFIG_INVALID`.
 */
export const s3Plugin: FsPluginDefinition = {
  name: 's3',
  schemes: ['s3', 's3a', 's3p'],
  options: templatesLongestFirst([...Object.values(s3Options), ...s3aOptionDefs()]),
  rules: [...s3Rules, ...s3Warnings],
  create(ctx) {
    return new S3FileSystem({
      settings: new S3Settings(ctx.config),
      guard: ctx.guard,
      log: ctx.log.child({ plugin: 's3' }),
      ca: ctx.ca,
    });
  },
  tokenProvider: s3TokenProvider,
};
