/**
 * What each Java credential provider class a Flink or Hadoop configuration may name
 * (`fs.s3a.aws.credentials.provider`, `fs.s3a.assumed.role.credentials.provider`) does, as the AWS
 * SDK for JavaScript's provider that does the same. A class missing here has no counterpart (it
 * reads Java system properties, or is a custom class the gateway cannot load): naming it fails
 * start-up with the key, rather than fetching with other credentials than the ones configured.
 */
export type ProviderKind =
  /** `fs.s3a.access.key` / `secret.key` (`s3.access-key` / `s3.secret-key`). */
  | 'static'
  /** The same plus `fs.s3a.session.token`. */
  | 'temporary'
  /** Unsigned requests (public buckets). */
  | 'anonymous'
  /** STS AssumeRole of `fs.s3a.assumed.role.arn`, signed with the base providers. */
  | 'assumed-role'
  /** `fromEnv`: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. */
  | 'env'
  /** `fromTokenFile`: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (EKS IRSA), via AssumeRoleWithWebIdentity. */
  | 'web-identity'
  /** `fromIni`: ~/.aws/credentials and config, AWS_PROFILE. */
  | 'profile'
  /** `fromHttp`: ECS task role and EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_*). */
  | 'container'
  /** `fromInstanceMetadata`: the EC2 instance profile (IMDS). */
  | 'instance'
  /** Container credentials, else the instance profile (Hadoop's IAMInstanceCredentialsProvider). */
  | 'iam-instance'
  /** `defaultProvider`: the SDK's whole default chain. */
  | 'default-chain';

export const PROVIDER_CLASSES: Readonly<Record<string, ProviderKind>> = {
  'org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider': 'static',
  'org.apache.hadoop.fs.s3a.BasicAWSCredentialsProvider': 'static',
  'org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider': 'temporary',
  'org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider': 'anonymous',
  'software.amazon.awssdk.auth.credentials.AnonymousCredentialsProvider': 'anonymous',
  'org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider': 'assumed-role',
  'com.amazonaws.auth.EnvironmentVariableCredentialsProvider': 'env',
  'software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider': 'env',
  'com.amazonaws.auth.WebIdentityTokenCredentialsProvider': 'web-identity',
  'software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider': 'web-identity',
  'com.amazonaws.auth.profile.ProfileCredentialsProvider': 'profile',
  'software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider': 'profile',
  'com.amazonaws.auth.ContainerCredentialsProvider': 'container',
  'com.amazonaws.auth.EC2ContainerCredentialsProviderWrapper': 'iam-instance',
  'software.amazon.awssdk.auth.credentials.ContainerCredentialsProvider': 'container',
  'com.amazonaws.auth.InstanceProfileCredentialsProvider': 'instance',
  'software.amazon.awssdk.auth.credentials.InstanceProfileCredentialsProvider': 'instance',
  'org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider': 'iam-instance',
  'org.apache.hadoop.fs.s3a.SharedInstanceProfileCredentialsProvider': 'iam-instance',
  'com.amazonaws.auth.DefaultAWSCredentialsProviderChain': 'default-chain',
  'software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider': 'default-chain',
};

/** Why a known Java class has no counterpart here (shown in the start-up error). */
const NO_COUNTERPART: Readonly<Record<string, string>> = {
  'com.amazonaws.auth.SystemPropertiesCredentialsProvider':
    'it reads Java system properties, which a Node process does not have; use the static keys or the environment provider',
  'software.amazon.awssdk.auth.credentials.SystemPropertyCredentialsProvider':
    'it reads Java system properties, which a Node process does not have; use the static keys or the environment provider',
};

/** The class names of a provider list as Hadoop reads it: comma- or newline-separated, blanks ignored. */
export function providerClasses(text: string): string[] {
  return text
    .split(/[,\s]+/)
    .map((c) => c.trim())
    .filter((c) => c !== '');
}

/** What is wrong with one class name, or undefined when it maps to a provider. */
export function unsupportedProvider(className: string): string | undefined {
  if (PROVIDER_CLASSES[className] !== undefined) return undefined;
  const why =
    NO_COUNTERPART[className] ??
    "the gateway is not a JVM and cannot load a Java class; it maps only the AWS SDK's and Hadoop's own providers";
  return `names ${className}, which has no counterpart in the gateway: ${why}. Supported: ${Object.keys(PROVIDER_CLASSES).join(', ')}`;
}
