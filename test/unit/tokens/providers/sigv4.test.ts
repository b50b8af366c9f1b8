import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { signV4, uriEncode } from '../../../../src/tokens/providers/sigv4';

// The hand-written SigV4 signer used for STS (no @aws-sdk/client-sts in the project). Checked here
// against AWS's published example and against the AWS SDK's own signer (@smithy/signature-v4, a
// transitive dependency of @aws-sdk/client-s3, used only as a test oracle); moto verifies it for
// real in test/integration/tokens/s3-provider.test.ts.

test("AWS's published example (IAM ListUsers, 2015-08-30) gives the documented signature", () => {
  const headers = signV4(
    {
      method: 'GET',
      url: new URL('https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08'),
      headers: { 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8' },
      body: '',
    },
    { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
    { region: 'us-east-1', service: 'iam' },
    new Date('2015-08-30T12:36:00Z'),
  );
  expect(headers['x-amz-date']).toBe('20150830T123600Z');
  expect(headers['authorization']).toBe(
    'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, ' +
      'SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7',
  );
});

/** node:crypto behind the SDK's Checksum interface. */
class NodeSha256 {
  private h: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', toBuffer(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.h.update(toBuffer(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.h.digest());
  }
  reset(): void {}
}

function toBuffer(d: string | ArrayBuffer | ArrayBufferView): Buffer {
  if (typeof d === 'string') return Buffer.from(d, 'utf8');
  if (ArrayBuffer.isView(d)) return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  return Buffer.from(d);
}

test.each<{ name: string; path: string; query: Record<string, string>; body: string; token: string | undefined }>([
  { name: 'STS AssumeRole form POST', path: '/', query: {}, body: 'Action=AssumeRole&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr&Version=2011-06-15', token: undefined },
  { name: 'a session token and an odd query', path: '/a b/c', query: { 'x y': "it's*~", a: '2', B: '1' }, body: '', token: 'FwoGZXIvYXdzE+/=' },
])('same signature as the AWS SDK signer: $name', async ({ path, query, body, token }) => {
  const creds = { accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret/with+chars', ...(token ? { sessionToken: token } : {}) };
  const when = new Date('2026-03-04T05:06:07Z');
  const url = new URL(`http://127.0.0.1:5123${path}`);
  for (const [k, v] of Object.entries(query)) url.searchParams.append(k, v);
  const mine = signV4(
    { method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, body },
    creds,
    { region: 'eu-west-1', service: 'sts' },
    when,
  );
  const sdk = new SignatureV4({ credentials: creds, region: 'eu-west-1', service: 'sts', sha256: NodeSha256, applyChecksum: false });
  const signed = await sdk.sign(
    {
      method: 'POST',
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: 5123,
      path,
      query,
      headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8', host: '127.0.0.1:5123' },
      body,
    },
    { signingDate: when },
  );
  expect(mine['authorization']).toBe(signed.headers['authorization']);
  if (token) expect(mine['x-amz-security-token']).toBe(token);
});

test('uriEncode leaves only RFC 3986 unreserved characters', () => {
  expect(uriEncode("a-_.~ !'()*/:")).toBe("a-_.~%20%21%27%28%29%2A%2F%3A");
});
