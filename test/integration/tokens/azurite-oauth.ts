import type { TokenCredential } from '@azure/identity';
import { type AzuriteAccount, startAzurite } from '../../servers/azurite';
import { makeSelfSignedCert } from '../../servers/tls';

/**
 * Azurite's Blob service over HTTPS with OAuth (`--oauth basic`), which is what `Get User
 * Delegation Key` needs: test/servers/azurite.ts's OAuth mode with a throw-away self-signed
 * certificate for 127.0.0.1, and that certificate to trust.
 */
export interface AzuriteOAuth {
  /** https://127.0.0.1:<port> */
  url: string;
  blobUrl(account: string): string;
  /** PEM of the self-signed certificate, to trust it. */
  ca: string;
  stop(): Promise<void>;
}

export async function startAzuriteOAuth(accounts: AzuriteAccount[]): Promise<AzuriteOAuth> {
  const tls = makeSelfSignedCert('127.0.0.1');
  const { url, blobUrl, stop } = await startAzurite({ accounts, oauth: { tls } });
  return { url, blobUrl, ca: tls.cert, stop };
}

/**
 * An Entra-like identity for Azurite's `--oauth basic`, which checks a bearer token's issuer,
 * audience and lifetime but not its signature. Counts the tokens it hands out.
 */
export function fakeEntraCredential(): TokenCredential & { issued: number } {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const cred = {
    issued: 0,
    async getToken() {
      cred.issued += 1;
      const now = Math.floor(Date.now() / 1000);
      const tenant = 'ab1f708d-50f6-404c-a006-d71b2ac7a606';
      const claims = {
        aud: 'https://storage.azure.com',
        iss: `https://sts.windows.net/${tenant}/`,
        iat: now - 60,
        nbf: now - 60,
        exp: now + 3600,
        oid: '11059fcc-5514-4800-b5f8-49808b9cfab6',
        tid: tenant,
      };
      return { token: `${b64({ typ: 'JWT', alg: 'RS256' })}.${b64(claims)}.c2lnbmF0dXJl`, expiresOnTimestamp: (now + 3600) * 1000 };
    },
  };
  return cred;
}
