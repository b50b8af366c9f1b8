import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { s3Plugin } from '../../fs-plugins/s3';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { startAwsRelay, type AwsRelay, type RelayRecord } from '../servers/aws-relay';
import { startMotoServer, type IamPolicy, type MotoServer } from '../servers/moto-server';
import { fixtureClient, putObject, type S3Creds } from '../servers/s3-server';
import { pluginFileSystem, readAll } from './plugin-fixtures';

// The S3 plugin's credential kinds as Flink and Hadoop configure them, against moto (IAM-checked SigV4,
// STS AssumeRole and AssumeRoleWithWebIdentity) behind two recording relays: one is the STS endpoint,
// one the S3 endpoint. The STS relay checks what moto does not: the web identity token and the ExternalId.

const ASSUMED_ROLE = 'org.apache.hadoop.fs.s3a.auth.AssumedRoleCredentialProvider';
const WEB_IDENTITY = 'com.amazonaws.auth.WebIdentityTokenCredentialsProvider';
const EXTERNAL_ID = `ext-${randomBytes(6).toString('hex')}`;

const readBucket = (bucket: string): IamPolicy => ({
  Version: '2012-10-17',
  Statement: [
    {
      Effect: 'Allow',
      Action: ['s3:GetObject', 's3:GetObjectVersion', 's3:ListBucket'],
      Resource: [`arn:aws:s3:::${bucket}`, `arn:aws:s3:::${bucket}/*`],
    },
  ],
});
const MAY_ASSUME: IamPolicy = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 'sts:AssumeRole', Resource: '*' }] };

/** A JWT as the EKS pod identity webhook's projected service-account token looks (moto and the relay do not check its signature). */
function irsaToken(): string {
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  return `${b64({ alg: 'RS256', kid: 'test' })}.${b64({ aud: ['sts.amazonaws.com'], iss: 'https://oidc.eks.eu-west-1.amazonaws.com/id/TEST', sub: 'system:serviceaccount:flink:jar-gateway', iat: now, exp: now + 86_400 })}.${randomBytes(64).toString('base64url')}`;
}

const failure = (p: Promise<unknown>) =>
  p.then(
    () => ({ code: 'resolved', message: '' }),
    (e: { code?: string; message?: string }) => ({ code: e.code, message: String(e.message) }),
  );

describe('s3 plugin: assumed roles, web identity and provider lists on moto', () => {
  let moto: MotoServer;
  let sts: AwsRelay;
  let s3: AwsRelay;
  let base: S3Creds;
  let reader: S3Creds;
  let roleA: string;
  let roleB: string;
  let irsaRole: string;
  let dir: string;
  let tokenFile: string;
  let token: string;
  const JAR_A = Buffer.from('PK\u0003\u0004 team a');
  const JAR_B = Buffer.from('PK\u0003\u0004 team b');
  const opened: FileSystem[] = [];
  const savedEnv = { ...process.env };

  const make = (settings: Record<string, string>) => {
    const fs = pluginFileSystem(
      s3Plugin,
      { 's3.endpoint': s3.url, 's3.path.style.access': 'true', 'fs.s3a.assumed.role.sts.endpoint': sts.url, ...settings },
      [`127.0.0.1:${sts.port}`, `127.0.0.1:${s3.port}`],
    );
    opened.push(fs);
    return fs;
  };
  const read = async (fs: FileSystem, uri: string) =>
    readAll((await fs.open(new URL(uri), { signal: AbortSignal.timeout(30_000) })).stream);
  const since = (relay: AwsRelay, n: number): RelayRecord[] => relay.records.slice(n);

  beforeAll(async () => {
    moto = await startMotoServer();
    const admin = await moto.createUser('fixture-admin', {
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Action: 's3:*', Resource: '*' }],
    });
    // The cluster's long-lived identity may only assume roles; it cannot read a jar itself.
    base = await moto.createUser('gateway-base', MAY_ASSUME);
    reader = await moto.createUser('gateway-reader', readBucket('team-a'));
    const oidc = await moto.createUser('oidc-relay', {
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Action: 'sts:*', Resource: '*' }],
    });
    roleA = await moto.createRole('team-a-reader', readBucket('team-a'));
    roleB = await moto.createRole('team-b-reader', readBucket('team-b'));
    // The pod's IRSA role, like the base user, may only assume the team roles.
    irsaRole = await moto.createRole('gateway-pod', MAY_ASSUME);
    await moto.enableAuth();
    const client = fixtureClient(moto.url, admin);
    try {
      for (const b of ['team-a', 'team-b']) await client.send(new CreateBucketCommand({ Bucket: b }));
    } finally {
      client.destroy();
    }
    await putObject(moto.url, admin, 'team-a', 'app.jar', JAR_A);
    await putObject(moto.url, admin, 'team-b', 'app.jar', JAR_B);
    token = irsaToken();
    sts = await startAwsRelay({
      target: moto.url,
      webIdentityToken: token,
      externalIds: { [roleA]: EXTERNAL_ID },
      webIdentitySigner: oidc,
    });
    s3 = await startAwsRelay({ target: moto.url });
    dir = await mkdtemp(join(tmpdir(), 'irsa-'));
    // As the EKS pod identity webhook projects it: the JWT alone, no trailing newline.
    tokenFile = join(dir, 'token');
    await writeFile(tokenFile, token);
  }, 90_000);

  beforeEach(() => {
    // Only what each test sets: nothing of the machine's AWS configuration may take part.
    for (const name of Object.keys(process.env)) if (name.startsWith('AWS_')) delete process.env[name];
    process.env.AWS_CONFIG_FILE = join(dir ?? tmpdir(), 'no-config');
    process.env.AWS_SHARED_CREDENTIALS_FILE = join(dir ?? tmpdir(), 'no-credentials');
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
  });

  afterEach(() => {
    for (const name of Object.keys(process.env)) if (!(name in savedEnv)) delete process.env[name];
    Object.assign(process.env, savedEnv);
  });

  afterAll(async () => {
    await Promise.all(opened.map((f) => f.close()));
    await sts?.stop();
    await s3?.stop();
    await moto?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('static keys → AssumeRole with external id, session name and duration: STS sees only the keys, S3 only the role', async () => {
    const [s, o] = [sts.records.length, s3.records.length];
    const fs = make({
      's3.access-key': base.accessKeyId,
      's3.secret-key': base.secretAccessKey,
      'fs.s3a.aws.credentials.provider': ASSUMED_ROLE,
      'fs.s3a.assumed.role.arn': roleA,
      'fs.s3a.assumed.role.external.id': EXTERNAL_ID,
      'fs.s3a.assumed.role.session.name': 'jar-fetch',
      'fs.s3a.assumed.role.session.duration': '20m',
    });
    expect(await read(fs, 's3://team-a/app.jar')).toEqual(JAR_A);
    const stsCalls = since(sts, s);
    expect(stsCalls).toEqual([
      expect.objectContaining({
        accessKeyId: base.accessKeyId,
        service: 'sts',
        params: expect.objectContaining({
          Action: 'AssumeRole',
          RoleArn: roleA,
          ExternalId: EXTERNAL_ID,
          RoleSessionName: 'jar-fetch',
          DurationSeconds: '1200',
        }),
      }),
    ]);
    const s3Calls = since(s3, o);
    expect(s3Calls.length).toBeGreaterThan(0);
    expect(s3Calls.filter((r) => r.accessKeyId === base.accessKeyId || !r.securityToken || r.service !== 's3')).toEqual([]);
    // Control: the base keys alone cannot read the jar (moto enforces the user's policy).
    expect(
      await failure(
        make({ 's3.access-key': base.accessKeyId, 's3.secret-key': base.secretAccessKey }).open(new URL('s3://team-a/app.jar'), {
          signal: AbortSignal.timeout(30_000),
        }),
      ),
    ).toMatchObject({ code: 'GW_FETCH_DENIED' });
  });

  it('a wrong external id is refused by STS: GW_FETCH_DENIED naming AssumeRole, and nothing reaches S3', async () => {
    const o = s3.records.length;
    const fs = make({
      's3.access-key': base.accessKeyId,
      's3.secret-key': base.secretAccessKey,
      'fs.s3a.assumed.role.arn': roleA,
      'fs.s3a.assumed.role.external.id': 'wrong',
    });
    const f = await failure(fs.stat(new URL('s3://team-a/app.jar'), AbortSignal.timeout(30_000)));
    expect(f).toMatchObject({ code: 'GW_FETCH_DENIED', message: expect.stringContaining('AssumeRole') });
    expect(f.message).toContain('AccessDenied');
    expect(f.message).not.toContain(base.secretAccessKey);
    expect(since(s3, o)).toEqual([]);
  });

  it('a web identity token file (IRSA) → AssumeRoleWithWebIdentity → AssumeRole: the token only to STS, unsigned; S3 sees only the team role', async () => {
    process.env.AWS_WEB_IDENTITY_TOKEN_FILE = tokenFile;
    process.env.AWS_ROLE_ARN = irsaRole;
    process.env.AWS_REGION = 'eu-west-1';
    const [s, o] = [sts.records.length, s3.records.length];
    const fs = make({
      'fs.s3a.aws.credentials.provider': ASSUMED_ROLE,
      'fs.s3a.assumed.role.credentials.provider': WEB_IDENTITY,
      'fs.s3a.assumed.role.arn': roleA,
      'fs.s3a.assumed.role.external.id': EXTERNAL_ID,
    });
    expect(await read(fs, 's3://team-a/app.jar')).toEqual(JAR_A);
    const stsCalls = since(sts, s);
    expect(stsCalls.map((r) => r.params?.Action)).toEqual(['AssumeRoleWithWebIdentity', 'AssumeRole']);
    const [exchange, assume] = stsCalls as [RelayRecord, RelayRecord];
    expect(exchange).toMatchObject({
      securityToken: false,
      params: expect.objectContaining({ RoleArn: irsaRole, WebIdentityToken: expect.stringMatching(/^sha256:/) }),
    });
    expect({ signedBy: exchange.accessKeyId, refused: exchange.refused }).toEqual({ signedBy: undefined, refused: undefined });
    // The pod's session (not a long-lived key) signs AssumeRole, in the STS region of the pod (AWS_REGION).
    expect(assume).toMatchObject({
      securityToken: true,
      region: 'eu-west-1',
      params: expect.objectContaining({ RoleArn: roleA, ExternalId: EXTERNAL_ID }),
    });
    const s3Calls = since(s3, o);
    expect(s3Calls.length).toBeGreaterThan(0);
    expect(s3Calls.filter((r) => r.accessKeyId === assume.accessKeyId || !r.securityToken)).toEqual([]);
    // Control: a token other than the file's is refused by the relay (as STS refuses a bad token).
    await writeFile(tokenFile, irsaToken());
    try {
      const other = make({ 'fs.s3a.aws.credentials.provider': WEB_IDENTITY });
      expect(await failure(other.stat(new URL('s3://team-a/app.jar'), AbortSignal.timeout(30_000)))).toMatchObject({
        code: 'GW_FETCH_DENIED',
        message: expect.stringContaining('InvalidIdentityToken'),
      });
    } finally {
      await writeFile(tokenFile, token);
    }
  });

  it('per bucket: fs.s3a.bucket.<b>.assumed.role.arn overrides the global role, with the default chain (IRSA) as the base', async () => {
    process.env.AWS_WEB_IDENTITY_TOKEN_FILE = tokenFile;
    process.env.AWS_ROLE_ARN = irsaRole;
    const s = sts.records.length;
    const fs = make({
      'fs.s3a.assumed.role.arn': roleA,
      'fs.s3a.assumed.role.external.id': EXTERNAL_ID,
      'fs.s3a.bucket.team-b.assumed.role.arn': roleB,
    });
    expect(await read(fs, 's3://team-a/app.jar')).toEqual(JAR_A);
    expect(await read(fs, 's3://team-b/app.jar')).toEqual(JAR_B);
    const roles = since(sts, s)
      .filter((r) => r.params?.Action === 'AssumeRole')
      .map((r) => r.params?.RoleArn);
    expect(roles.sort()).toEqual([roleA, roleB].sort());
    // Control: without the bucket's own role, team-b is read as team-a's role, which may not.
    const global = make({ 'fs.s3a.assumed.role.arn': roleA, 'fs.s3a.assumed.role.external.id': EXTERNAL_ID });
    expect(await failure(global.open(new URL('s3://team-b/app.jar'), { signal: AbortSignal.timeout(30_000) }))).toMatchObject({
      code: 'GW_FETCH_DENIED',
      message: expect.stringContaining('403'),
    });
  });

  it('EnvironmentVariableCredentialsProvider reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; the static keys are then not used', async () => {
    process.env.AWS_ACCESS_KEY_ID = reader.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = reader.secretAccessKey;
    const o = s3.records.length;
    const fs = make({
      's3.aws.credentials.provider': 'software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider',
      's3.access-key': base.accessKeyId,
      's3.secret-key': base.secretAccessKey,
    });
    expect(await read(fs, 's3://team-a/app.jar')).toEqual(JAR_A);
    expect(new Set(since(s3, o).map((r) => r.accessKeyId))).toEqual(new Set([reader.accessKeyId]));
  });

  it('a provider list is tried in order: Simple without keys yields nothing, Temporary needs a token, the environment answers', async () => {
    process.env.AWS_ACCESS_KEY_ID = reader.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = reader.secretAccessKey;
    const fs = make({
      'fs.s3a.aws.credentials.provider':
        'org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider,\n  org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider, com.amazonaws.auth.EnvironmentVariableCredentialsProvider',
    });
    expect(await read(fs, 's3://team-a/app.jar')).toEqual(JAR_A);
  });

  it('fs.s3a.endpoint.region is the signing region; a bare-host fs.s3a.endpoint follows fs.s3a.connection.ssl.enabled', async () => {
    const o = s3.records.length;
    const keys = { 'fs.s3a.access.key': reader.accessKeyId, 'fs.s3a.secret.key': reader.secretAccessKey };
    const fs = pluginFileSystem(
      s3Plugin,
      {
        ...keys,
        'fs.s3a.endpoint': `127.0.0.1:${s3.port}`,
        'fs.s3a.connection.ssl.enabled': 'false',
        'fs.s3a.path.style.access': 'true',
        'fs.s3a.endpoint.region': 'eu-west-3',
      },
      [`127.0.0.1:${s3.port}`],
    );
    opened.push(fs);
    expect(await read(fs, 's3://team-a/app.jar')).toEqual(JAR_A);
    expect(since(s3, o).map((r) => r.region)).toEqual(expect.arrayContaining(['eu-west-3']));
    expect(since(s3, o).filter((r) => r.region !== 'eu-west-3')).toEqual([]);
    // With SSL on (Hadoop's default) the same bare host is spoken to in TLS, which the plain relay does not answer.
    const tls = pluginFileSystem(s3Plugin, { ...keys, 'fs.s3a.endpoint': `127.0.0.1:${s3.port}`, 'fs.s3a.path.style.access': 'true' }, [
      `127.0.0.1:${s3.port}`,
    ]);
    opened.push(tls);
    expect(await failure(tls.stat(new URL('s3://team-a/app.jar'), AbortSignal.timeout(30_000)))).toMatchObject({
      code: 'GW_FETCH_UNAVAILABLE',
    });
  });
});
