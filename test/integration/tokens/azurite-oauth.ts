import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TokenCredential } from '@azure/identity';
import { projectRoot } from '../../../src/project-root';
import type { AzuriteAccount } from '../../servers/azurite';
import { type ChildServer, startChildServer } from '../../servers/child-server';

/**
 * Azurite's Blob service over HTTPS with OAuth (`--oauth basic`), which is what `Get User
 * Delegation Key` needs. test/servers/azurite.ts starts plain http only, hence this variant: a
 * throw-away self-signed certificate for 127.0.0.1 (openssl), the same child-process handling.
 */
export interface AzuriteOAuth {
  /** https://127.0.0.1:<port> */
  url: string;
  blobUrl(account: string): string;
  /** PEM of the self-signed certificate, to trust it. */
  ca: string;
  stop(): Promise<void>;
}

const READY = /listens on (https:\/\/\S+)/;

export async function startAzuriteOAuth(accounts: AzuriteAccount[]): Promise<AzuriteOAuth> {
  const dir = await mkdtemp(join(tmpdir(), 'azurite-oauth-'));
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
    '-keyout',
    key,
    '-out',
    cert,
  ]);
  const main = join(projectRoot(__dirname), 'node_modules', 'azurite', 'dist', 'src', 'blob', 'main.js');
  const args = [
    main,
    '--blobHost',
    '127.0.0.1',
    '--blobPort',
    '0',
    '--location',
    join(dir, 'data'),
    '--disableTelemetry',
    '--silent',
    '--skipApiVersionCheck',
    '--oauth',
    'basic',
    '--cert',
    cert,
    '--key',
    key,
  ];
  const env = { ...process.env, AZURITE_ACCOUNTS: accounts.map((a) => `${a.name}:${a.key}`).join(';') };
  let server: ChildServer | undefined;
  const stop = async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    server = await startChildServer('Azurite (OAuth)', process.execPath, args, { env, ready: READY });
    const url = server.match[1]!;
    return { url, blobUrl: (account) => `${url}/${account}`, ca: await readFile(cert, 'utf8'), stop };
  } catch (err) {
    await stop();
    throw err;
  }
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
