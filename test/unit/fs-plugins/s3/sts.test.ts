import type { IncomingMessage, ServerResponse } from 'node:http';
import { Sts } from '../../../../fs-plugins/s3/sts';
import { startOrigin, type Origin } from '../../../helpers/origin';
import { failure } from '../../tokens/providers/provider-kit';

// The SDK-backed STS edge's handling of answers moto does not produce, against a node:http origin:
// what it sends, an error document, an answer without credentials, XML entities.

let origin: Origin;
let answer: { status: number; body: string } = { status: 200, body: '' };
let seen: { headers: IncomingMessage['headers']; body: string }[] = [];

beforeAll(async () => {
  origin = await startOrigin((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      seen.push({ headers: req.headers, body });
      res.writeHead(answer.status, { 'content-type': 'text/xml' });
      res.end(answer.body);
    });
  });
});

afterAll(async () => {
  await origin?.close();
});

beforeEach(() => {
  seen = [];
});

function client(): Sts {
  return new Sts({
    endpoint: new URL(origin.url),
    region: 'eu-central-1',
    credentials: { accessKeyId: 'AKIACLUSTER', secretAccessKey: 'cluster-secret-value' },
    timeoutMs: 5000,
  });
}

test('a signed AssumeRole form POST; the credentials are parsed, entities decoded', async () => {
  answer = {
    status: 200,
    body:
      '<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials>' +
      '<AccessKeyId>ASIAJOB</AccessKeyId><SecretAccessKey>s&amp;cret</SecretAccessKey><SessionToken>tok+/=</SessionToken>' +
      '<Expiration>2030-01-01T01:00:00Z</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>',
  };
  const c = client();
  const creds = await c.assumeRole('arn:aws:iam::1:role/r', 'flink-j', 900);
  expect(creds).toEqual({
    accessKeyId: 'ASIAJOB',
    secretAccessKey: 's&cret',
    sessionToken: 'tok+/=',
    expiration: Date.parse('2030-01-01T01:00:00Z'),
  });
  const req = seen[0]!;
  expect(Object.fromEntries(new URLSearchParams(req.body))).toEqual({
    Action: 'AssumeRole',
    Version: '2011-06-15',
    RoleArn: 'arn:aws:iam::1:role/r',
    RoleSessionName: 'flink-j',
    DurationSeconds: '900',
  });
  // Signed by the SDK for STS in the configured region (moto verifies such signatures for real, test/integration/tokens/s3-provider.test.ts).
  const date = String(req.headers['x-amz-date']);
  expect(date).toMatch(/^\d{8}T\d{6}Z$/);
  expect(req.headers['authorization']).toMatch(
    new RegExp(
      `^AWS4-HMAC-SHA256 Credential=AKIACLUSTER/${date.slice(0, 8)}/eu-central-1/sts/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$`,
    ),
  );
  await c.close();
});

test('an error document becomes a message with the status, the AWS code and its message', async () => {
  answer = {
    status: 403,
    body: '<ErrorResponse><Error><Type>Sender</Type><Code>ExpiredToken</Code><Message>The security token included in the request is expired</Message></Error></ErrorResponse>',
  };
  const c = client();
  expect(await failure(() => c.getSessionToken(3600))).toBe(
    `STS GetSessionToken at ${origin.url}/ answered HTTP 403 ExpiredToken: The security token included in the request is expired`,
  );
  await c.close();
});

test('a 200 without complete credentials is refused', async () => {
  answer = {
    status: 200,
    body: '<GetSessionTokenResponse><GetSessionTokenResult><Credentials><AccessKeyId>A</AccessKeyId></Credentials></GetSessionTokenResult></GetSessionTokenResponse>',
  };
  const c = client();
  expect(await failure(() => c.getSessionToken(3600))).toBe(
    `STS GetSessionToken at ${origin.url}/ answered HTTP 200 without complete credentials`,
  );
  await c.close();
});

test('an unreachable endpoint fails with the reason, and close() is idempotent', async () => {
  const c = new Sts({
    endpoint: new URL('http://127.0.0.1:1/'),
    region: 'us-east-1',
    credentials: { accessKeyId: 'A', secretAccessKey: 'cluster-secret-value' },
    timeoutMs: 5000,
  });
  const message = await failure(() => c.getSessionToken(3600));
  expect(message).toMatch(/^STS GetSessionToken at http:\/\/127\.0\.0\.1:1\/ failed: .*ECONNREFUSED/);
  expect(message).not.toContain('cluster-secret-value');
  await c.close();
  await c.close();
});
