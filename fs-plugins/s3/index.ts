import type { FsPluginDefinition } from '../../src/artifacts/plugin-kit';
import { S3Settings, s3Options, s3Rules } from './options';
import { S3FileSystem } from './s3-file-system';
import { s3TokenProvider } from './token-provider';

export { S3FileSystem } from './s3-file-system';
export { s3Options } from './options';
export { S3_JOB_ROLE_ARN_KEY, S3DelegationTokenProvider, s3ProviderOptions, type S3Tokens } from './token-provider';

/**
 * S3 and S3-compatible stores for `s3://bucket/key`, `s3a://` and `s3p://` (Flink's and Hadoop's
 * names for the same thing); `?versionId=` pins an object version.
 *
 * Credentials: `s3.access-key`/`s3.secret-key`, per bucket `fs.s3a.bucket.<bucket>.access.key`/
 * `.secret.key`. With no static keys the AWS SDK's default credential chain applies: environment
 * (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY), web identity tokens (EKS IRSA), EKS pod identity and
 * ECS container credentials, SSO and ~/.aws profile files, and EC2 instance metadata.
 *
 * Option values are checked by the options registry (`s3Rules`, the `url` type of the endpoints):
 * a half key pair or a malformed endpoint fails start-up with `GW_CONFIG_INVALID`.
 */
export const s3Plugin: FsPluginDefinition = {
  name: 's3',
  schemes: ['s3', 's3a', 's3p'],
  options: Object.values(s3Options),
  rules: s3Rules,
  create(ctx) {
    return new S3FileSystem({
      settings: new S3Settings(ctx.config),
      guard: ctx.guard,
      log: ctx.log.child({ plugin: 's3' }),
      ...(ctx.ca !== undefined ? { ca: ctx.ca } : {}),
    });
  },
  tokenProvider: s3TokenProvider,
};
