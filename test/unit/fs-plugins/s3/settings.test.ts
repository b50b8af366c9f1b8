import { s3Plugin } from '../../../../fs-plugins/s3';
import { S3Settings } from '../../../../fs-plugins/s3/bucket-settings';
import { ConfigError, OptionsRegistry, type Configuration, type RawEntry } from '../../../../src/config/registry';

const raw = (values: Record<string, string>): Map<string, RawEntry> =>
  new Map(Object.entries(values).map(([k, v]) => [k, { value: v, source: 'test' }]));
const registry = () => new OptionsRegistry(s3Plugin.options, s3Plugin.rules);

function resolve(values: Record<string, string>): { config?: Configuration; problems: string[] } {
  try {
    return { config: registry().resolve(raw(values)), problems: [] };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { problems: err.problems.map((p) => `${p.key}: ${p.message}`) };
  }
}
const notices = (values: Record<string, string>) => (resolve(values).config?.notices ?? []).map((n) => `${n.key}: ${n.message}`);

describe('s3 credential settings at start-up', () => {
  it('a provider class with no counterpart fails start-up naming the key and the class (global, Flink spelling, per bucket)', () => {
    const { problems } = resolve({
      'fs.s3a.aws.credentials.provider': 'com.example.MyProvider',
      's3.assumed.role.credentials.provider': 'com.amazonaws.auth.SystemPropertiesCredentialsProvider',
      'fs.s3a.bucket.team.b.aws.credentials.provider': 'org.apache.hadoop.fs.s3a.auth.delegation.SessionTokenBinding',
    });
    expect(problems).toEqual([
      expect.stringMatching(
        /^fs\.s3a\.aws\.credentials\.provider: names com\.example\.MyProvider, which has no counterpart in the gateway: .*cannot load a Java class/,
      ),
      expect.stringMatching(
        /^s3\.assumed\.role\.credentials\.provider: names com\.amazonaws\.auth\.SystemPropertiesCredentialsProvider.*Java system properties/,
      ),
      expect.stringMatching(
        /^fs\.s3a\.bucket\.team\.b\.aws\.credentials\.provider: names org\.apache\.hadoop\.fs\.s3a\.auth\.delegation\.SessionTokenBinding/,
      ),
    ]);
  });

  it('AssumedRoleCredentialProvider without a role ARN, and a list that yields nothing, fail start-up', () => {
    expect(resolve({ 'fs.s3a.aws.credentials.provider': 'org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider' }).problems).toEqual([
      'fs.s3a.assumed.role.arn: is unset, but fs.s3a.aws.credentials.provider names AssumedRoleCredentialProvider (the global settings)',
    ]);
    expect(resolve({ 's3.aws.credentials.provider': 'org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider' }).problems).toEqual([
      expect.stringMatching(/^s3\.aws\.credentials\.provider: yields no credentials for the global settings/),
    ]);
  });

  it('maps every listed class, and every supported class resolves without a problem', () => {
    const list =
      'org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider, org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider,\n com.amazonaws.auth.EnvironmentVariableCredentialsProvider, org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider';
    const { config, problems } = resolve({
      'fs.s3a.aws.credentials.provider': list,
      'fs.s3a.access.key': 'AKIA1',
      'fs.s3a.secret.key': 's1',
    });
    expect(problems).toEqual([]);
    expect(new S3Settings(config!, {}).credentials().map((c) => c.kind)).toEqual(['static', 'env', 'iam-instance']);
  });

  it("a bucket's own key wins over fs.s3a.*, which wins over s3.*; a role takes the static keys as its base", () => {
    const { config, problems } = resolve({
      's3.access-key': 'AKIAFLINK',
      's3.secret-key': 'flink',
      'fs.s3a.bucket.a.b.access.key': 'AKIABUCKET',
      'fs.s3a.bucket.a.b.secret.key': 'bucket',
      's3.endpoint.region': 'eu-west-1',
      'fs.s3a.endpoint.region': 'eu-west-2',
      'fs.s3a.assumed.role.arn': 'arn:aws:iam::1:role/global',
      'fs.s3a.bucket.a.b.assumed.role.arn': 'arn:aws:iam::1:role/bucket',
      'fs.s3a.bucket.a.b.assumed.role.session.duration': '1h',
      'fs.s3a.bucket.a.b.assumed.role.sts.endpoint': 'sts.eu-west-2.amazonaws.com',
    });
    expect(problems).toEqual([]);
    const settings = new S3Settings(config!, { AWS_REGION: 'eu-central-1' });
    expect(settings.forBucket('a.b')).toMatchObject({
      region: 'eu-west-2',
      tls: true,
      sts: { endpoint: new URL('https://sts.eu-west-2.amazonaws.com'), region: 'eu-central-1' },
      credentials: [
        {
          kind: 'assumed-role',
          role: { arn: 'arn:aws:iam::1:role/bucket', durationSeconds: 3600, sessionName: 'flink-jar-gateway' },
          base: [{ kind: 'static', accessKeyId: 'AKIABUCKET' }],
        },
      ],
    });
    expect(settings.forBucket('other')).toMatchObject({
      credentials: [
        {
          kind: 'assumed-role',
          role: { arn: 'arn:aws:iam::1:role/global', durationSeconds: 1800 },
          base: [{ kind: 'static', accessKeyId: 'AKIAFLINK' }],
        },
      ],
      sts: { region: 'eu-central-1' },
    });
  });

  it("an endpoint that is neither a host nor an http(s) URL fails start-up; the duration is held to STS's 15 min to 12 h", () => {
    expect(resolve({ 'fs.s3a.endpoint': 'ftp://x', 'fs.s3a.assumed.role.session.duration': '5m' }).problems).toEqual([
      expect.stringMatching(/^fs\.s3a\.assumed\.role\.session\.duration: .*minimum/),
      expect.stringMatching(/^fs\.s3a\.endpoint: 'ftp:\/\/x' is not an endpoint/),
    ]);
  });

  it('recognised keys the fetch does not act on are start-up warnings naming them, never silence', () => {
    expect(
      notices({
        'fs.s3a.proxy.host': 'proxy.internal',
        's3.encryption.algorithm': 'SSE-C',
        'fs.s3a.bucket.x.requester.pays.enabled': 'true',
        'fs.s3a.aws.credentials.provider': 'com.amazonaws.auth.EnvironmentVariableCredentialsProvider',
        'fs.s3a.assumed.role.arn': 'arn:aws:iam::1:role/r',
        's3.endpoint': 'https://minio:9000',
        'fs.s3a.connection.ssl.enabled': 'false',
        // Keys Flink's writers use and a fetch has no business with stay quiet.
        'fs.s3a.fast.upload': 'true',
      }),
    ).toEqual([
      expect.stringMatching(/^fs\.s3a\.proxy\.host: recognised S3A key, not supported/),
      expect.stringMatching(/^s3\.encryption\.algorithm: recognised S3A key, not supported.*SSE-C/),
      expect.stringMatching(/^fs\.s3a\.bucket\.x\.requester\.pays\.enabled: recognised S3A key/),
      'fs.s3a.assumed.role.arn: ignored for the global settings, as Hadoop does: fs.s3a.aws.credentials.provider does not name org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider',
      'fs.s3a.connection.ssl.enabled: is false, but s3.endpoint says https://, which wins (as in Hadoop)',
    ]);
  });
});
