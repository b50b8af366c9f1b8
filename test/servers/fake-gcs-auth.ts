import { generateKeyPairSync, randomBytes, randomUUID, verify, type KeyObject } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TlsMaterial } from './tls';

/** The audience google-auth-library signs a service account's assertion for (its token URL). */
export const GOOGLE_TOKEN_AUDIENCE = 'https://oauth2.googleapis.com/token';

/** A service account as a key file describes it, with its private key (PEM) for the file only. */
export interface TestServiceAccount {
  email: string;
  privateKey: string;
  publicKey: KeyObject;
}

/** A fresh RSA service account (each test run has its own key; nothing is checked in). */
export function makeServiceAccount(name = 'jar-reader'): TestServiceAccount {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    email: `${name}@test-project.iam.gserviceaccount.com`,
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKey,
  };
}

/** Writes a service-account key file in the form the Cloud console downloads, with `token_uri` as given. */
export async function writeKeyFile(path: string, account: TestServiceAccount, tokenUri: string): Promise<void> {
  const key = {
    type: 'service_account',
    project_id: 'test-project',
    private_key_id: randomBytes(20).toString('hex'),
    private_key: account.privateKey,
    client_email: account.email,
    client_id: String(Date.now()),
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: tokenUri,
  };
  await writeFile(path, JSON.stringify(key, null, 2), { mode: 0o600 });
}

/** One token request as the stand-in saw it (the assertion only as whether it verified). */
export interface GoogleTokenRequest {
  path: string;
  grantType?: string;
  iss?: string;
  scope?: string;
  valid: boolean;
  status: number;
}

export interface GoogleTokenStandIn {
  /** https://127.0.0.1:<port>/token */
  tokenUrl: string;
  port: number;
  requests: GoogleTokenRequest[];
  /** Access tokens issued so far (the storage front accepts only these). */
  issued: Set<string>;
  stop(): Promise<void>;
}

const fromB64 = (s: string) => Buffer.from(s, 'base64url');

/**
 * A local HTTPS stand-in for Google's OAuth 2.0 token endpoint on 127.0.0.1, port 0: the JWT-bearer
 * grant a service-account key makes. It verifies the assertion's RS256 signature with the account's
 * public key, its issuer, audience, lifetime and a Cloud Storage scope, and issues a random access
 * token for an hour. Every request is recorded.
 */
export async function startGoogleTokenStandIn(o: { tls: TlsMaterial; accounts: TestServiceAccount[] }): Promise<GoogleTokenStandIn> {
  const requests: GoogleTokenRequest[] = [];
  const issued = new Set<string>();
  const server: Server = createServer({ key: o.tls.key, cert: o.tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const record: GoogleTokenRequest = { path: (req.url ?? '/').split('?')[0]!, valid: false, status: 0 };
      const grantType = form.get('grant_type');
      if (grantType !== null) record.grantType = grantType;
      const answer = (status: number, body: object) => {
        record.status = status;
        requests.push(record);
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      const [head, claims, sig] = (form.get('assertion') ?? '').split('.');
      if (
        req.method !== 'POST' ||
        grantType !== 'urn:ietf:params:oauth:grant-type:jwt-bearer' ||
        head === undefined ||
        claims === undefined ||
        sig === undefined
      ) {
        return answer(400, { error: 'invalid_request', error_description: 'a JWT-bearer grant was expected' });
      }
      let c: { iss?: string; aud?: string; scope?: string; exp?: number; iat?: number };
      try {
        c = JSON.parse(fromB64(claims).toString('utf8')) as typeof c;
      } catch {
        return answer(400, { error: 'invalid_grant', error_description: 'Invalid JWT.' });
      }
      if (c.iss !== undefined) record.iss = c.iss;
      if (c.scope !== undefined) record.scope = c.scope;
      const account = o.accounts.find((a) => a.email === c.iss);
      const signed = account !== undefined && verify('sha256', Buffer.from(`${head}.${claims}`), account.publicKey, fromB64(sig));
      const now = Date.now() / 1000;
      if (!signed) return answer(400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' });
      if (c.aud !== GOOGLE_TOKEN_AUDIENCE || typeof c.exp !== 'number' || c.exp < now || !/devstorage|cloud-platform/.test(c.scope ?? '')) {
        return answer(400, { error: 'invalid_grant', error_description: 'Invalid JWT: audience, lifetime or scope.' });
      }
      record.valid = true;
      const token = `ya29.${randomUUID()}`;
      issued.add(token);
      return answer(200, { access_token: token, expires_in: 3600, token_type: 'Bearer' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    tokenUrl: `https://127.0.0.1:${port}/token`,
    port,
    requests,
    issued,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One storage request through the front (the token only as whether it was one the stand-in issued). */
export interface GcsFrontRecord {
  method: string;
  path: string;
  authorized: boolean;
}

export interface GcsFront {
  /** https://127.0.0.1:<port>/ : the storage root URL to configure. */
  url: string;
  port: number;
  records: GcsFrontRecord[];
  stop(): Promise<void>;
}

/**
 * An HTTPS front for fake-gcs-server, which checks no credentials: like Cloud Storage it answers
 * 401 `authError` unless the request carries `Authorization: Bearer <a token the stand-in issued>`,
 * and relays everything else to the emulator as it comes (body streamed, with backpressure).
 */
export async function startGcsFront(o: { tls: TlsMaterial; target: string; issued: ReadonlySet<string> }): Promise<GcsFront> {
  const records: GcsFrontRecord[] = [];
  const target = new URL(o.target);
  const server: Server = createServer({ key: o.tls.key, cert: o.tls.cert }, (req, res) => {
    const bearer = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    const authorized = bearer !== undefined && o.issued.has(bearer);
    records.push({ method: req.method ?? '', path: req.url ?? '', authorized });
    if (!authorized) {
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { code: 401, message: 'Invalid Credentials', errors: [{ reason: 'authError' }] } }));
      req.resume();
      return;
    }
    const { authorization: _dropped, ...headers } = req.headers;
    const upstream = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...headers, host: target.host } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}/`,
    port,
    records,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
