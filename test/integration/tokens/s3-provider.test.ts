import { CreateBucketCommand, GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { S3_JOB_ROLE_ARN_KEY, S3DelegationTokenProvider, type S3Tokens } from '../../../fs-plugins/s3/token-provider';
import { startMotoServer, type IamPolicy, type MotoServer } from '../../servers/moto-server';
import { putObject, type S3Creds } from '../../servers/s3-server';
import { decode, failure, providerConfig, recordingCallback } from '../../unit/tokens/providers/provider-kit';

// The s3 provider against moto's server (PyPI moto[server], test/servers/requirements.txt) with IAM
// authentication on: moto verifies the SigV4 signature of the provider's STS calls against the
// cluster user's secret, checks the user's policy for sts:AssumeRole on the role, and checks the
// assumed role's credentials (key, secret and session token) and policy on every S3 call.
//
// moto's GetSessionToken returns fixed example credentials that moto itself does not recognise once
// auth is on (it tracks only assumed-role sessions), so for the cluster session this test can check
// the answer and its expiry, not an S3 call made with it.

const JOB_SESSION = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const JOB_ROLE = 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb';
const HOUR = 3_600_000;

const TRUST: IamPolicy = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 'sts:AssumeRole', Resource: '*' }] };

let moto: MotoServer;
let admin: S3Creds;
let cluster: S3Creds;
let readerRole: string;
let forbiddenRole: string;
let adminRole: string;

beforeAll(async () => {
  moto = await startMotoServer();
  admin = await moto.createUser('fixture-admin', {
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Action: 's3:*', Resource: '*' }],
  });
  readerRole = await createRole(moto, 'job-reader', {
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Action: 's3:GetObject', Resource: 'arn:aws:s3:::job-data/*' }],
  });
  forbiddenRole = await createRole(moto, 'not-assumable', {
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Action: 's3:GetObject', Resource: '*' }],
  });
  adminRole = await createRole(moto, 'admin', { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }] });
  // The cluster's long-lived identity: its own session, and the reader role (not the others).
  cluster = await moto.createUser('gateway-cluster', {
    Version: '2012-10-17',
    Statement: [
      { Effect: 'Allow', Action: 'sts:GetSessionToken', Resource: '*' },
      { Effect: 'Allow', Action: 'sts:AssumeRole', Resource: readerRole },
    ],
  });
  await moto.enableAuth();
  const s3 = client(admin);
  try {
    await s3.send(new CreateBucketCommand({ Bucket: 'job-data' }));
    await s3.send(new CreateBucketCommand({ Bucket: 'other-data' }));
  } finally {
    s3.destroy();
  }
  await putObject(moto.url, admin, 'job-data', 'in/part-0', Buffer.from('job input'));
  await putObject(moto.url, admin, 'other-data', 'x', Buffer.from('someone else'));
});

afterAll(async () => {
  await moto?.stop();
});

function provider(creds: S3Creds = cluster, extra: Record<string, string> = {}): S3DelegationTokenProvider {
  const p = new S3DelegationTokenProvider();
  p.init(providerConfig('s3', settings(creds, extra)), { reobtainDelegationTokens: () => {} });
  return p;
}

function settings(creds: S3Creds, extra: Record<string, string> = {}): Record<string, string> {
  return {
    'security.delegation.token.provider.s3.access-key': creds.accessKeyId,
    'security.delegation.token.provider.s3.secret-key': creds.secretAccessKey,
    'security.delegation.token.provider.s3.endpoint': moto.url,
    'security.delegation.token.provider.s3.region': 'us-east-1',
    'security.delegation.token.provider.s3.allowed-role-arns': `${readerRole};${forbiddenRole}`,
    ...extra,
  };
}

function client(creds: S3Creds & { sessionToken?: string }): S3Client {
  return new S3Client({ endpoint: moto.url, region: 'us-east-1', forcePathStyle: true, credentials: creds, maxAttempts: 1 });
}

async function getObject(creds: S3Creds & { sessionToken: string }, bucket: string, key: string): Promise<string> {
  // Only the three fields: the SDK would read our ISO `expiration` string as its Date-typed field.
  const s3 = client({ accessKeyId: creds.accessKeyId, secretAccessKey: creds.secretAccessKey, sessionToken: creds.sessionToken });
  try {
    const res = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return await res.Body!.transformToString();
  } catch (err) {
    const e = err as { name: string; $metadata?: { httpStatusCode?: number } };
    return `${e.$metadata?.httpStatusCode} ${e.name}`;
  } finally {
    s3.destroy();
  }
}

test('session credentials for the cluster and assumed-role credentials for a job, each with an expiry', async () => {
  const p = new S3DelegationTokenProvider();
  const cb = recordingCallback(() => p);
  p.init(providerConfig('s3', settings(cluster)), cb);
  expect(p.delegationTokensRequired()).toBe(false);
  p.registerJob(JOB_SESSION, {});
  p.registerJob(JOB_ROLE, { [S3_JOB_ROLE_ARN_KEY]: readerRole });
  p.registerJob(JOB_ROLE, { [S3_JOB_ROLE_ARN_KEY]: readerRole }); // idempotent: no second re-obtain
  expect(cb.requiredAtCall).toEqual([true, true]);

  const before = Date.now();
  const obtained = await p.obtainDelegationTokens();
  const after = Date.now();
  const tokens = decode<S3Tokens>(obtained.tokens);
  expect(tokens.version).toBe(1);
  expect(tokens.region).toBe('us-east-1');

  const session = tokens.jobs[JOB_SESSION]!;
  expect(session.roleArn).toBeUndefined();
  expect(session.sessionToken.length).toBeGreaterThan(20);
  // Requested DurationSeconds=3600 (the default duration), and moto honours it.
  expect(Date.parse(session.expiration) - before).toBeGreaterThan(HOUR - 60_000);
  // Bracketed by the call (before … after), so a slow call on a busy machine does not count.
  expect(Date.parse(session.expiration) - after).toBeLessThan(HOUR + 60_000);

  const role = tokens.jobs[JOB_ROLE]!;
  expect(role.roleArn).toBe(readerRole);
  expect(role.accessKeyId).not.toBe(cluster.accessKeyId);
  expect(Date.parse(role.expiration) - before).toBeGreaterThan(HOUR - 60_000);
  expect(obtained.validUntil).toBe(Math.min(Date.parse(session.expiration), Date.parse(role.expiration)));
  expect(new TextDecoder().decode(obtained.tokens)).not.toContain(cluster.secretAccessKey);

  // moto checks key, secret, session token and the role's policy on these calls.
  expect(await getObject(role, 'job-data', 'in/part-0')).toBe('job input');
  expect(await getObject(role, 'other-data', 'x')).toBe('403 AccessDenied');
  expect(await getObject({ ...role, sessionToken: `${role.sessionToken}x` }, 'job-data', 'in/part-0')).toBe('400 InvalidToken');

  // The next cycle obtains new role credentials.
  const again = decode<S3Tokens>((await p.obtainDelegationTokens()).tokens);
  expect(again.jobs[JOB_ROLE]!.accessKeyId).not.toBe(role.accessKeyId);

  p.unregisterJob(JOB_ROLE);
  p.unregisterJob(JOB_ROLE);
  expect(Object.keys(decode<S3Tokens>((await p.obtainDelegationTokens()).tokens).jobs)).toEqual([JOB_SESSION]);
  p.unregisterJob(JOB_SESSION);
  expect(p.delegationTokensRequired()).toBe(false);
  await p.close();
});

test('a role that is not allow-listed is rejected at registerJob', async () => {
  const p = provider();
  const message = await failure(() => p.registerJob(JOB_ROLE, { [S3_JOB_ROLE_ARN_KEY]: adminRole }));
  expect(message).toBe(
    `the IAM role '${adminRole}' (${S3_JOB_ROLE_ARN_KEY}) is not allowed for jobs; an administrator can add it to ` +
      'security.delegation.token.provider.s3.allowed-role-arns',
  );
  expect(p.delegationTokensRequired()).toBe(false);
  await p.close();
});

test("an allow-listed role that IAM does not let the cluster assume fails the cycle with STS's reason", async () => {
  const p = provider();
  p.registerJob(JOB_ROLE, { [S3_JOB_ROLE_ARN_KEY]: forbiddenRole });
  const message = await failure(() => p.obtainDelegationTokens());
  expect(message).toContain(
    `AssumeRole of '${forbiddenRole}' for job ${JOB_ROLE} failed: STS AssumeRole at ${moto.url}/ answered HTTP 403 AccessDenied`,
  );
  await p.close();
});

test('use-default-credentials: the STS calls are signed by the AWS default credential chain (here its environment step, as IRSA or pod identity would be); only jobs naming a role get credentials', async () => {
  const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY, profile: process.env.AWS_PROFILE };
  process.env.AWS_ACCESS_KEY_ID = cluster.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = cluster.secretAccessKey;
  delete process.env.AWS_PROFILE;
  const p = new S3DelegationTokenProvider();
  try {
    const {
      'security.delegation.token.provider.s3.access-key': _k,
      'security.delegation.token.provider.s3.secret-key': _s,
      ...rest
    } = settings(cluster);
    p.init(providerConfig('s3', { ...rest, 'security.delegation.token.provider.s3.use-default-credentials': 'true' }), {
      reobtainDelegationTokens: () => {},
    });
    p.registerJob(JOB_SESSION, {});
    p.registerJob(JOB_ROLE, { [S3_JOB_ROLE_ARN_KEY]: readerRole });
    const tokens = decode<S3Tokens>((await p.obtainDelegationTokens()).tokens);
    // No cluster session without a long-lived key: the job that names no role gets nothing.
    expect(Object.keys(tokens.jobs)).toEqual([JOB_ROLE]);
    expect(await getObject(tokens.jobs[JOB_ROLE]!, 'job-data', 'in/part-0')).toBe('job input');
  } finally {
    await p.close();
    for (const [k, v] of [
      ['AWS_ACCESS_KEY_ID', saved.id],
      ['AWS_SECRET_ACCESS_KEY', saved.secret],
      ['AWS_PROFILE', saved.profile],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test('use-default-credentials together with a key pair is a configuration error naming both', () => {
  const p = new S3DelegationTokenProvider();
  expect(() =>
    p.init(providerConfig('s3', { ...settings(cluster), 'security.delegation.token.provider.s3.use-default-credentials': 'true' }), {
      reobtainDelegationTokens: () => {},
    }),
  ).toThrow(/use-default-credentials.*is true while security.delegation.token.provider.s3.access-key is set/);
});

test('a wrong secret key: moto rejects the signature, and the message carries no secret', async () => {
  const wrong = { ...cluster, secretAccessKey: 'wrong-secret-0123456789abcdefghijklmnopqrst' };
  const p = provider(wrong);
  p.registerJob(JOB_SESSION, {});
  const message = await failure(() => p.obtainDelegationTokens());
  expect(message).toMatch(/^GetSessionToken for the cluster failed: STS GetSessionToken at .* answered HTTP 403 SignatureDoesNotMatch/);
  expect(message).not.toContain(wrong.secretAccessKey);
  expect(message).not.toContain(cluster.secretAccessKey);
  await p.close();
});

/** IAM CreateRole + PutRolePolicy while moto's auth is still off; returns the role ARN. */
async function createRole(server: MotoServer, name: string, policy: IamPolicy): Promise<string> {
  const xml = await iam(server.url, 'CreateRole', { RoleName: name, AssumeRolePolicyDocument: JSON.stringify(TRUST) });
  await iam(server.url, 'PutRolePolicy', { RoleName: name, PolicyName: `${name}-policy`, PolicyDocument: JSON.stringify(policy) });
  const m = /<Arn>([^<]+)<\/Arn>/.exec(xml);
  if (!m) throw new Error(`moto CreateRole answer has no <Arn>: ${xml.slice(0, 300)}`);
  return m[1]!;
}

/** An unsigned IAM query call (moto routes by the credential scope; it checks nothing until enableAuth()). */
async function iam(url: string, action: string, params: Record<string, string>): Promise<string> {
  const date = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const res = await fetch(`${url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
      'x-amz-date': date,
      authorization: `AWS4-HMAC-SHA256 Credential=AKIAMOTOSETUP0000000/${date.slice(0, 8)}/us-east-1/iam/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`,
    },
    body: new URLSearchParams({ Action: action, Version: '2010-05-08', ...params }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`moto IAM ${action} failed: ${res.status} ${text}`);
  return text;
}
