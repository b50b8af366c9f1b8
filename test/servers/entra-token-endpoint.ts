import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TlsMaterial } from './tls';

/** One token request as the endpoint saw it (secrets and assertions only as whether they matched). */
export interface TokenRequest {
  path: string;
  grantType?: string;
  clientId?: string;
  scope?: string;
  /** 'secret' / 'assertion': which proof came, and whether it was the expected one. */
  proof?: { kind: 'secret' | 'assertion'; valid: boolean };
  /** The status the endpoint answered. */
  status: number;
}

export interface EntraStandInOptions {
  tls: TlsMaterial;
  tenantId: string;
  clientId: string;
  /** The service principal's secret (client credentials with a secret). */
  clientSecret?: string;
  /** The federated token (workload identity): the client assertion must be exactly this. */
  federatedToken?: string;
  /** The scope a storage token must be asked for. */
  scope: string;
  /** The `aud` of the access tokens issued (Azurite checks it against the storage audiences). */
  audience: string;
}

export interface EntraStandIn {
  /** The authority host, e.g. https://127.0.0.1:41234 */
  authorityHost: string;
  port: number;
  /** ClientCredsTokenProvider's endpoint form: https://<host>/<tenant>/oauth2/token */
  tokenEndpointV1: string;
  requests: TokenRequest[];
  stop(): Promise<void>;
}

const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');

/**
 * A local HTTPS stand-in for Entra ID (Azure AD) on 127.0.0.1, port 0, in the test's process: the
 * tenant's OpenID metadata and its v2.0 token endpoint for the client-credentials grant, with a
 * client secret or a client assertion (the federated token of workload identity). It checks the
 * client id, the proof and the scope, and issues an access token as Entra does for storage: a JWT
 * with issuer https://sts.windows.net/<tenant>/, the audience given, and an hour's lifetime (its
 * signature is not checked by Azurite). Every request is recorded.
 */
export async function startEntraStandIn(o: EntraStandInOptions): Promise<EntraStandIn> {
  const requests: TokenRequest[] = [];
  let base = '';
  const server: Server = createServer({ key: o.tls.key, cert: o.tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const json = (status: number, body: object) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.method === 'GET' && path === `/${o.tenantId}/v2.0/.well-known/openid-configuration`) {
        return json(200, {
          issuer: `${base}/${o.tenantId}/v2.0`,
          authorization_endpoint: `${base}/${o.tenantId}/oauth2/v2.0/authorize`,
          token_endpoint: `${base}/${o.tenantId}/oauth2/v2.0/token`,
          end_session_endpoint: `${base}/${o.tenantId}/oauth2/v2.0/logout`,
          jwks_uri: `${base}/${o.tenantId}/discovery/v2.0/keys`,
          response_types_supported: ['code', 'token'],
          subject_types_supported: ['pairwise'],
          id_token_signing_alg_values_supported: ['RS256'],
        });
      }
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const record: TokenRequest = { path, status: 0 };
      const grantType = form.get('grant_type');
      const clientId = form.get('client_id');
      const scope = form.get('scope');
      if (grantType !== null) record.grantType = grantType;
      if (clientId !== null) record.clientId = clientId;
      if (scope !== null) record.scope = scope;
      const answer = (status: number, body: object) => {
        record.status = status;
        requests.push(record);
        json(status, body);
      };
      if (req.method !== 'POST' || (path !== `/${o.tenantId}/oauth2/v2.0/token` && path !== `/${o.tenantId}/oauth2/token`)) {
        return answer(404, { error: 'not_found' });
      }
      if (form.has('client_secret'))
        record.proof = { kind: 'secret', valid: o.clientSecret !== undefined && form.get('client_secret') === o.clientSecret };
      else if (form.has('client_assertion')) {
        const assertionType = form.get('client_assertion_type') === 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
        record.proof = {
          kind: 'assertion',
          valid: assertionType && o.federatedToken !== undefined && form.get('client_assertion') === o.federatedToken,
        };
      }
      if (grantType !== 'client_credentials') return answer(400, { error: 'unsupported_grant_type' });
      if (clientId !== o.clientId || record.proof?.valid !== true)
        return answer(401, { error: 'invalid_client', error_description: 'AADSTS7000215: Invalid client secret or assertion provided.' });
      if (scope !== o.scope)
        return answer(400, { error: 'invalid_scope', error_description: `AADSTS70011: the scope ${scope} is not valid here.` });
      const now = Math.floor(Date.now() / 1000);
      const accessToken = `${b64({ typ: 'JWT', alg: 'RS256' })}.${b64({ aud: o.audience, iss: `https://sts.windows.net/${o.tenantId}/`, iat: now - 60, nbf: now - 60, exp: now + 3600, tid: o.tenantId, appid: o.clientId, oid: o.clientId })}.${randomBytes(32).toString('base64url')}`;
      answer(200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: accessToken });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  base = `https://127.0.0.1:${port}`;
  return {
    authorityHost: base,
    port,
    tokenEndpointV1: `${base}/${o.tenantId}/oauth2/token`,
    requests,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
