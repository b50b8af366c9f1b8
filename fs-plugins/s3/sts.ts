import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { LookupFunction } from 'node:net';
import {
  AssumeRoleCommand,
  AssumeRoleWithWebIdentityCommand,
  GetSessionTokenCommand,
  STSClient,
  type Credentials,
} from '@aws-sdk/client-sts';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { displayUrl, trustedCa } from '../../src/plugin-kit';

/** Temporary credentials from STS. */
export interface SessionCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  /** epoch ms */
  expiration: number;
}

export interface StsOptions {
  /** e.g. https://sts.eu-west-1.amazonaws.com, or a moto server; undefined = AWS STS of `region`. */
  endpoint?: URL;
  region: string;
  /** Absent: the AWS default credential chain of this process (environment, IRSA, pod identity, instance profile). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | AwsCredentialIdentityProvider;
  timeoutMs: number;
  /** PEM CA bundle; undefined = system CAs. */
  ca?: string | undefined;
  /** A guarded DNS lookup for the connections (the plugin's restricted-host guard). */
  lookup?: LookupFunction;
}

/** AssumeRole's optional members (Hadoop's fs.s3a.assumed.role.external.id and .policy). */
export interface AssumeRoleExtras {
  externalId?: string;
  policy?: string;
}

/** STS answered with an error, or not at all. Carries no credential, only what AWS said. */
export class StsRequestError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    readonly awsCode?: string,
  ) {
    super(message);
    this.name = 'StsRequestError';
  }
}

/**
 * The two STS calls the `s3` token provider needs (GetSessionToken, AssumeRole), on
 * `@aws-sdk/client-sts`: the SDK signs, retries and parses; this edge turns what it throws into
 * one-line messages that name the call, the endpoint and AWS's own code, never a credential.
 */
export class Sts {
  private readonly client: STSClient;
  private readonly controller = new AbortController();
  private readonly where: string;

  constructor(private readonly o: StsOptions) {
    this.where = o.endpoint ? displayUrl(o.endpoint) : `AWS STS (${o.region})`;
    const agent = { keepAlive: true, maxSockets: 4, ...(o.lookup ? { lookup: o.lookup } : {}) };
    this.client = new STSClient({
      ...(o.endpoint ? { endpoint: o.endpoint.href.replace(/\/$/, '') } : {}),
      region: o.region,
      ...(o.credentials ? { credentials: typeof o.credentials === 'function' ? o.credentials : { ...o.credentials } } : {}),
      maxAttempts: 2,
      requestHandler: new NodeHttpHandler({
        httpAgent: new HttpAgent(agent),
        // The bundle is trusted in addition to the system's CAs (as every plugin's connections do).
        httpsAgent: new HttpsAgent(o.ca === undefined ? agent : { ...agent, ca: trustedCa(o.ca) }),
        connectionTimeout: Math.min(o.timeoutMs, 10_000),
        requestTimeout: o.timeoutMs,
      }),
    });
  }

  /** `GetSessionToken` with the long-lived key pair (not callable with session credentials). */
  getSessionToken(durationSeconds: number): Promise<SessionCredentials> {
    return this.call('GetSessionToken', new GetSessionTokenCommand({ DurationSeconds: durationSeconds }));
  }

  /** `AssumeRole`; `sessionName` shows up in CloudTrail, so it names the job. */
  assumeRole(roleArn: string, sessionName: string, durationSeconds: number, extras: AssumeRoleExtras = {}): Promise<SessionCredentials> {
    return this.call(
      'AssumeRole',
      new AssumeRoleCommand({
        RoleArn: roleArn,
        RoleSessionName: sessionName,
        DurationSeconds: durationSeconds,
        ExternalId: extras.externalId,
        Policy: extras.policy,
      }),
    );
  }

  /** `AssumeRoleWithWebIdentity`: unsigned, the web identity token (EKS IRSA's projected token) is the proof. */
  assumeRoleWithWebIdentity(roleArn: string, sessionName: string, token: string, durationSeconds?: number): Promise<SessionCredentials> {
    return this.call(
      'AssumeRoleWithWebIdentity',
      new AssumeRoleWithWebIdentityCommand({
        RoleArn: roleArn,
        RoleSessionName: sessionName,
        WebIdentityToken: token,
        DurationSeconds: durationSeconds,
      }),
    );
  }

  /** Aborts requests in flight and releases the connection pool. Idempotent. */
  async close(): Promise<void> {
    this.controller.abort(new StsRequestError('the STS client was closed'));
    this.client.destroy();
  }

  private async call(
    action: string,
    command: GetSessionTokenCommand | AssumeRoleCommand | AssumeRoleWithWebIdentityCommand,
  ): Promise<SessionCredentials> {
    const abortSignal = AbortSignal.any([this.controller.signal, AbortSignal.timeout(this.o.timeoutMs)]);
    let creds: Credentials | undefined;
    let status: number | undefined;
    try {
      // One call site for every command: their outputs share the Credentials member.
      const out = await this.client.send(command as GetSessionTokenCommand, { abortSignal });
      creds = out.Credentials;
      status = out.$metadata.httpStatusCode;
    } catch (err) {
      throw this.translate(action, err);
    }
    const expiration = creds?.Expiration?.getTime() ?? Number.NaN;
    if (!creds?.AccessKeyId || !creds.SecretAccessKey || !creds.SessionToken || Number.isNaN(expiration)) {
      throw new StsRequestError(`STS ${action} at ${this.where} answered HTTP ${status ?? '?'} without complete credentials`, status);
    }
    return { accessKeyId: creds.AccessKeyId, secretAccessKey: creds.SecretAccessKey, sessionToken: creds.SessionToken, expiration };
  }

  private translate(action: string, err: unknown): StsRequestError {
    const e = err as Error & { $metadata?: { httpStatusCode?: number }; $fault?: string; code?: string };
    // The signing identity's own STS call failed (a web identity exchange under AssumeRole): keep what AWS said.
    if (e.name === 'StsRequestError') {
      const inner = err as StsRequestError;
      return new StsRequestError(`STS ${action} at ${this.where}: no signing credentials: ${inner.message}`, inner.status, inner.awsCode);
    }
    const status = e.$metadata?.httpStatusCode;
    if (e.$fault !== undefined && status !== undefined) {
      // A service error: AWS's code is the error's name, its message AWS's own text.
      const message = e.message && e.message !== 'UnknownError' ? `: ${e.message}` : '';
      return new StsRequestError(`STS ${action} at ${this.where} answered HTTP ${status} ${e.name}${message}`, status, e.name);
    }
    const reason =
      e.name === 'TimeoutError' || e.name === 'AbortError'
        ? `no answer within ${this.o.timeoutMs} ms`
        : [e.code, e.message].filter(Boolean).join(' ');
    return new StsRequestError(`STS ${action} at ${this.where} failed: ${reason}`);
  }
}
