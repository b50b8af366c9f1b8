import { createHash, createHmac } from 'node:crypto';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { S3Creds } from './s3-server';

/** What one request through the relay carried (no secret: the key id, never a signature or token value). */
export interface RelayRecord {
  method: string;
  path: string;
  /** The SigV4 credential scope's access key id; undefined for an unsigned request. */
  accessKeyId?: string;
  /** The scope's region and service (`us-east-1`, `sts` / `s3`). */
  region?: string;
  service?: string;
  /** Whether x-amz-security-token came along (session credentials). */
  securityToken: boolean;
  /** STS query-API form fields (Action, RoleArn, ExternalId, ...); the web identity token replaced by its SHA-256. */
  params?: Record<string, string>;
  /** What the relay answered itself instead of forwarding, if it did. */
  refused?: string;
}

export interface AwsRelayOptions {
  /** moto's URL, e.g. http://127.0.0.1:41234 */
  target: string;
  /**
   * What moto does not check, checked here before forwarding (as AWS STS does): the web identity
   * token AssumeRoleWithWebIdentity must carry, and the ExternalId each role's trust policy demands.
   */
  webIdentityToken?: string;
  externalIds?: Record<string, string>;
  /**
   * moto authenticates every call once auth is on, also the unsigned AssumeRoleWithWebIdentity. After
   * checking the token the relay signs that call with this identity (one allowed sts:*), standing in
   * for AWS's own trust in the OIDC provider.
   */
  webIdentitySigner?: S3Creds;
}

export interface AwsRelay {
  url: string;
  port: number;
  records: RelayRecord[];
  stop(): Promise<void>;
}

const SCOPE = /Credential=([^/,\s]+)\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request/;

/**
 * A recording HTTP relay in front of moto, on 127.0.0.1 port 0, in the test's process: it records
 * which credentials each request carried and forwards it unchanged (the Host header and the signature
 * stay valid), except STS calls that fail the checks above, which it answers with AWS's errors.
 */
export async function startAwsRelay(opts: AwsRelayOptions): Promise<AwsRelay> {
  const target = new URL(opts.target);
  const records: RelayRecord[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Buffer = Buffer.concat(chunks);
      const auth = String(req.headers.authorization ?? '');
      const scope = SCOPE.exec(auth);
      const record: RelayRecord = {
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        securityToken: req.headers['x-amz-security-token'] !== undefined,
      };
      if (scope) Object.assign(record, { accessKeyId: scope[1], region: scope[2], service: scope[3] });
      let headers: IncomingHttpHeaders = { ...req.headers };
      const form = String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')
        ? new URLSearchParams(body.toString('utf8'))
        : undefined;
      if (form?.has('Action')) {
        const params = Object.fromEntries(form);
        if (params.WebIdentityToken !== undefined)
          params.WebIdentityToken = `sha256:${createHash('sha256').update(params.WebIdentityToken).digest('hex')}`;
        record.params = params;
        const action = form.get('Action');
        const refuse = (status: number, code: string, message: string) => {
          record.refused = code;
          records.push(record);
          res
            .writeHead(status, { 'content-type': 'text/xml' })
            .end(
              `<ErrorResponse><Error><Type>Sender</Type><Code>${code}</Code><Message>${message}</Message></Error><RequestId>relay</RequestId></ErrorResponse>`,
            );
        };
        if (action === 'AssumeRole') {
          const wanted = opts.externalIds?.[form.get('RoleArn') ?? ''];
          if (wanted !== undefined && form.get('ExternalId') !== wanted)
            return refuse(403, 'AccessDenied', 'not authorized to perform sts:AssumeRole (ExternalId)');
        }
        if (action === 'AssumeRoleWithWebIdentity') {
          if (opts.webIdentityToken === undefined || form.get('WebIdentityToken') !== opts.webIdentityToken)
            return refuse(400, 'InvalidIdentityToken', 'the web identity token is not valid');
          if (scope) return refuse(400, 'InvalidParameterValue', 'AssumeRoleWithWebIdentity must not be signed');
          if (opts.webIdentitySigner === undefined) return refuse(500, 'InternalFailure', 'the relay has no signer for moto');
          ({ headers, body } = signForm(req.headers, body, opts.webIdentitySigner));
        }
      }
      records.push(record);
      const upstream = request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    records,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** SigV4 of a form POST for STS (what moto checks: host, x-amz-date, content-type, the body's hash). */
function signForm(incoming: IncomingHttpHeaders, body: Buffer, creds: S3Creds): { headers: IncomingHttpHeaders; body: Buffer } {
  const amzDate = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const region = 'us-east-1';
  const host = String(incoming.host);
  const contentType = String(incoming['content-type']);
  const hex = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
  const signed = 'content-type;host;x-amz-date';
  const canonical = ['POST', '/', '', `content-type:${contentType}`, `host:${host}`, `x-amz-date:${amzDate}`, '', signed, hex(body)].join(
    '\n',
  );
  const scope = `${day}/${region}/sts/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, hex(canonical)].join('\n');
  let key: Buffer = createHmac('sha256', `AWS4${creds.secretAccessKey}`).update(day).digest();
  for (const part of [region, 'sts', 'aws4_request']) key = createHmac('sha256', key).update(part).digest();
  const signature = createHmac('sha256', key).update(toSign).digest('hex');
  return {
    body,
    headers: {
      host,
      'content-type': contentType,
      'content-length': String(body.length),
      'x-amz-date': amzDate,
      authorization: `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope}, SignedHeaders=${signed}, Signature=${signature}`,
    },
  };
}
