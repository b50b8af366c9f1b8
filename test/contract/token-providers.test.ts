import { randomBytes } from 'node:crypto';
import { azureBlobTokenProvider, AZURE_BLOB_JOB_CONTAINERS_KEY } from '../../fs-plugins/azure/token-provider';
import { s3TokenProvider, S3_JOB_ROLE_ARN_KEY } from '../../fs-plugins/s3/token-provider';
import { OAUTH2_JOB_SCOPE_KEY } from '../../src/tokens/providers/oauth2-provider';
import { oauth2TokenProvider } from '../../src/tokens/providers/oauth2-provider';
import { startOrigin } from '../helpers/origin';
import { startAzurite } from '../servers/azurite';
import { startMotoServer } from '../servers/moto-server';
import { tokenProviderContract } from './token-provider-contract';

// One contract, every built-in token provider, each on its real server (as in test/integration/tokens/).

tokenProviderContract(s3TokenProvider, async () => {
  const moto = await startMotoServer();
  const role = await createRole(moto.url, 'contract-reader');
  const secret = `contract-secret-${randomBytes(8).toString('hex')}`;
  return {
    settings: {
      'security.delegation.token.provider.s3.access-key': 'AKIACONTRACT00000000',
      'security.delegation.token.provider.s3.secret-key': secret,
      'security.delegation.token.provider.s3.endpoint': moto.url,
      'security.delegation.token.provider.s3.allowed-role-arns': role,
    },
    allowed: { [S3_JOB_ROLE_ARN_KEY]: role },
    refused: { [S3_JOB_ROLE_ARN_KEY]: 'arn:aws:iam::123456789012:role/not-listed' },
    secrets: [secret],
    close: () => moto.stop(),
  };
});

tokenProviderContract(azureBlobTokenProvider, async () => {
  const account = { name: 'contractacct', key: randomBytes(64).toString('base64') };
  const azurite = await startAzurite({ accounts: [account] });
  return {
    settings: {
      'security.delegation.token.provider.azure-blob.account-name': account.name,
      'security.delegation.token.provider.azure-blob.account-key': account.key,
      'security.delegation.token.provider.azure-blob.endpoint': azurite.blobUrl(account.name),
      'security.delegation.token.provider.azure-blob.allowed-containers': 'allowed',
    },
    allowed: { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'allowed' },
    refused: { [AZURE_BLOB_JOB_CONTAINERS_KEY]: 'private' },
    secrets: [account.key],
    close: () => azurite.stop(),
  };
});

tokenProviderContract(oauth2TokenProvider, async () => {
  const secret = `oauth-secret-${randomBytes(8).toString('hex')}`;
  let n = 0;
  // A client-credentials endpoint that checks the client (RFC 6749 §4.4) and echoes it when refusing.
  const origin = await startOrigin((req, res) => {
    const ok = req.headers.authorization === `Basic ${Buffer.from(`gw:${secret}`).toString('base64')}`;
    req.resume();
    req.once('end', () => {
      res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          ok
            ? { access_token: `tok-${++n}`, token_type: 'Bearer', expires_in: 3600 }
            : { error: 'invalid_client', error_description: `bad secret ${secret}` },
        ),
      );
    });
  });
  return {
    settings: {
      'security.delegation.token.provider.oauth2.token-endpoint': `${origin.url}/oauth/token`,
      'security.delegation.token.provider.oauth2.client-id': 'gw',
      'security.delegation.token.provider.oauth2.client-secret': secret,
      'security.delegation.token.provider.oauth2.allowed-scopes': 'events.read',
    },
    allowed: { [OAUTH2_JOB_SCOPE_KEY]: 'events.read' },
    refused: { [OAUTH2_JOB_SCOPE_KEY]: 'admin' },
    secrets: [secret],
    close: () => origin.close(),
  };
});

/** IAM CreateRole on moto before any auth (unsigned; moto routes by the credential scope). */
async function createRole(url: string, name: string): Promise<string> {
  const date = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const trust = { Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 'sts:AssumeRole', Resource: '*' }] };
  const res = await fetch(`${url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
      'x-amz-date': date,
      authorization: `AWS4-HMAC-SHA256 Credential=AKIAMOTOSETUP0000000/${date.slice(0, 8)}/us-east-1/iam/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`,
    },
    body: new URLSearchParams({
      Action: 'CreateRole',
      Version: '2010-05-08',
      RoleName: name,
      AssumeRolePolicyDocument: JSON.stringify(trust),
    }),
  });
  const xml = await res.text();
  const arn = /<Arn>([^<]+)<\/Arn>/.exec(xml)?.[1];
  if (!res.ok || !arn) throw new Error(`moto CreateRole failed: ${res.status} ${xml.slice(0, 300)}`);
  return arn;
}
