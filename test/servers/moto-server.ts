import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { startChildServer } from './child-server';
import type { S3Creds } from './s3-server';

/** How a fresh checkout gets moto's server (scripts/test-setup.sh, run by npm test, does exactly this). */
export const MOTO_INSTALL_COMMAND = 'python3 -m venv .tmp/venv && .tmp/venv/bin/pip install -r test/servers/requirements.txt';

export interface MotoServer {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  port: number;
  child: ChildProcess;
  /**
   * Creates an IAM user with one access key and an inline policy (IAM's CreateUser,
   * CreateAccessKey, PutUserPolicy). Only before `enableAuth()`: these calls are not signed.
   */
  createUser(name: string, policy: IamPolicy): Promise<S3Creds>;
  /**
   * Creates an IAM role with an inline policy (CreateRole, PutRolePolicy) and returns its ARN. moto
   * does not evaluate the trust policy; the caller's own policy must allow sts:AssumeRole. Only
   * before `enableAuth()`.
   */
  createRole(name: string, policy: IamPolicy): Promise<string>;
  /**
   * From now on moto checks every request: the access key must be one created by `createUser`
   * (else 403 InvalidAccessKeyId), the SigV4 signature must verify against its secret (else 403
   * SignatureDoesNotMatch), and the user's policy must allow the action (else 403 AccessDenied).
   */
  enableAuth(): Promise<void>;
  stop(): Promise<void>;
}

export interface IamPolicy {
  Version: '2012-10-17';
  Statement: { Effect: 'Allow' | 'Deny'; Action: string | string[]; Resource: string | string[] }[];
}

/** The moto_server executable of the project-local virtualenv. */
export function motoServerBin(): string {
  return join(projectRoot(__dirname), '.tmp', 'venv', 'bin', 'moto_server');
}

// werkzeug logs this (to stderr) once the socket is bound, with the port the OS picked for -p 0.
const READY = /Running on (http:\/\/127\.0\.0\.1:\d+)/;

/**
 * Starts moto's S3/IAM server (PyPI `moto[server]`, test/servers/requirements.txt) from the
 * project's virtualenv as a child process on 127.0.0.1, port 0, with IAM authentication off until
 * `enableAuth()`. Throws, naming the install command, when the virtualenv lacks moto: the tests that
 * need it fail rather than skip. `stop()` kills that child by PID (moto keeps its state in memory).
 */
export async function startMotoServer(): Promise<MotoServer> {
  const bin = motoServerBin();
  if (!existsSync(bin)) {
    throw new Error(
      `moto server not installed: ${bin} is missing. Install it with \`${MOTO_INSTALL_COMMAND}\` (from the project root; npm test does this first).`,
    );
  }
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONUNBUFFERED: '1' };
  // Auth starts off (INITIAL_NO_AUTH_ACTION_COUNT unset = infinite) and is turned on by enableAuth().
  delete env.INITIAL_NO_AUTH_ACTION_COUNT;
  // moto would otherwise take the account/credentials of whoever runs the tests into account.
  for (const name of Object.keys(env)) if (name.startsWith('AWS_') || name.startsWith('MOTO_')) delete env[name];
  const server = await startChildServer('moto server', bin, ['-H', '127.0.0.1', '-p', '0'], { env, ready: READY, timeoutMs: 120_000 });
  const { child, stop } = server;
  const url = server.match[1]!;
  try {
    // Bound is not the same as serving: wait for a real answer from moto's own API.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await fetch(`${url}/moto-api/data.json`).catch(() => undefined);
      await res?.arrayBuffer();
      if (res?.ok) break;
      if (Date.now() > deadline) throw new Error(`moto server at ${url} did not answer /moto-api/data.json within 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    let authEnabled = false;
    return {
      url,
      port: Number(new URL(url).port),
      child,
      stop,
      async createUser(name, policy) {
        if (authEnabled) throw new Error('createUser() must run before enableAuth(): its IAM calls are unsigned');
        await iam(url, 'CreateUser', { UserName: name });
        const xml = await iam(url, 'CreateAccessKey', { UserName: name });
        await iam(url, 'PutUserPolicy', { UserName: name, PolicyName: `${name}-policy`, PolicyDocument: JSON.stringify(policy) });
        return { accessKeyId: xmlField(xml, 'AccessKeyId'), secretAccessKey: xmlField(xml, 'SecretAccessKey') };
      },
      async createRole(name, policy) {
        if (authEnabled) throw new Error('createRole() must run before enableAuth(): its IAM calls are unsigned');
        const trust = {
          Version: '2012-10-17',
          Statement: [{ Effect: 'Allow', Principal: { AWS: '*' }, Action: ['sts:AssumeRole', 'sts:AssumeRoleWithWebIdentity'] }],
        };
        const xml = await iam(url, 'CreateRole', { RoleName: name, AssumeRolePolicyDocument: JSON.stringify(trust) });
        await iam(url, 'PutRolePolicy', { RoleName: name, PolicyName: `${name}-policy`, PolicyDocument: JSON.stringify(policy) });
        return xmlField(xml, 'Arn');
      },
      async enableAuth() {
        // moto's own switch (what @set_initial_no_auth_action_count uses in server mode): with a
        // count of 0, every request from now on is authenticated and authorized through IAM.
        const res = await fetch(`${url}/moto-api/reset-auth`, { method: 'POST', body: '0' });
        const text = await res.text();
        if (!res.ok) throw new Error(`moto reset-auth failed: ${res.status} ${text}`);
        authEnabled = true;
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * One IAM query-API call while auth is off. moto routes a request by the service in its
 * Authorization header's credential scope; the signature itself is not checked until enableAuth().
 */
async function iam(url: string, action: string, params: Record<string, string>): Promise<string> {
  const body = new URLSearchParams({ Action: action, Version: '2010-05-08', ...params });
  const date = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const res = await fetch(`${url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded; charset=utf-8',
      'x-amz-date': date,
      authorization: `AWS4-HMAC-SHA256 Credential=AKIAMOTOSETUP0000000/${date.slice(0, 8)}/us-east-1/iam/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`,
    },
    body,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`moto IAM ${action} failed: ${res.status} ${text}`);
  return text;
}

function xmlField(xml: string, name: string): string {
  const m = new RegExp(`<${name}>([^<]+)</${name}>`).exec(xml);
  if (!m) throw new Error(`moto IAM answer has no <${name}>: ${xml.slice(0, 500)}`);
  return m[1]!;
}
