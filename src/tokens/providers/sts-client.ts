import { Agent, type Dispatcher } from 'undici';
import { signV4, type SigV4Credentials } from './sigv4';
import { displayUrl, readLimited } from './provider-support';

/** Temporary credentials from STS. */
export interface SessionCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  /** epoch ms */
  expiration: number;
}

export interface StsClientOptions {
  /** e.g. https://sts.eu-west-1.amazonaws.com, or a moto server */
  endpoint: URL;
  region: string;
  credentials: SigV4Credentials;
  timeoutMs: number;
  now: () => number;
  /** PEM CA bundle; undefined = system CAs. */
  ca?: string;
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

const MAX_RESPONSE_BYTES = 256 * 1024;

/**
 * The two STS query-API calls the `s3` provider needs (GetSessionToken, AssumeRole), signed with
 * SigV4 over undici. A stand-in for `@aws-sdk/client-sts`, which is not a dependency of the project
 * (only its nested copy without GetSessionToken is installed): with client-sts installed, this file
 * is the one to replace.
 */
export class StsClient {
  private readonly dispatcher: Dispatcher;
  private readonly controller = new AbortController();

  constructor(private readonly o: StsClientOptions) {
    this.dispatcher = new Agent({ connections: 4, keepAliveTimeout: 10_000, ...(o.ca === undefined ? {} : { connect: { ca: o.ca } }) });
  }

  /** `GetSessionToken` with the long-lived key pair (not callable with session credentials). */
  getSessionToken(durationSeconds: number): Promise<SessionCredentials> {
    return this.call('GetSessionToken', { DurationSeconds: String(durationSeconds) });
  }

  /** `AssumeRole`; `sessionName` shows up in CloudTrail, so it names the job. */
  assumeRole(roleArn: string, sessionName: string, durationSeconds: number): Promise<SessionCredentials> {
    return this.call('AssumeRole', { RoleArn: roleArn, RoleSessionName: sessionName, DurationSeconds: String(durationSeconds) });
  }

  /** Aborts requests in flight and releases the connection pool. Idempotent. */
  async close(): Promise<void> {
    this.controller.abort(new StsRequestError('the STS client was closed'));
    await this.dispatcher.close().catch(() => undefined);
  }

  private async call(action: string, params: Record<string, string>): Promise<SessionCredentials> {
    const url = new URL(this.o.endpoint.href);
    const body = new URLSearchParams({ Action: action, Version: '2011-06-15', ...params }).toString();
    const headers = signV4(
      { method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }, body },
      this.o.credentials,
      { region: this.o.region, service: 'sts' },
      new Date(this.o.now()),
    );
    const where = displayUrl(url);
    let status: number;
    let text: string;
    try {
      const res = await this.dispatcher.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.any([this.controller.signal, AbortSignal.timeout(this.o.timeoutMs)]),
      });
      status = res.statusCode;
      text = await readLimited(res.body, MAX_RESPONSE_BYTES);
    } catch (err) {
      const e = err as Error;
      const reason = e.name === 'TimeoutError' ? `no answer within ${this.o.timeoutMs} ms` : e.message;
      throw new StsRequestError(`STS ${action} at ${where} failed: ${reason}`);
    }
    if (status < 200 || status >= 300) {
      const code = xmlText(text, 'Code');
      const message = xmlText(text, 'Message');
      throw new StsRequestError(
        `STS ${action} at ${where} answered HTTP ${status}${code ? ` ${code}` : ''}${message ? `: ${message}` : ''}`,
        status,
        code,
      );
    }
    const creds = xmlBlock(text, 'Credentials');
    const accessKeyId = creds && xmlText(creds, 'AccessKeyId');
    const secretAccessKey = creds && xmlText(creds, 'SecretAccessKey');
    const sessionToken = creds && xmlText(creds, 'SessionToken');
    const expirationText = creds && xmlText(creds, 'Expiration');
    const expiration = expirationText ? Date.parse(expirationText) : Number.NaN;
    if (!accessKeyId || !secretAccessKey || !sessionToken || Number.isNaN(expiration)) {
      throw new StsRequestError(`STS ${action} at ${where} answered HTTP ${status} without complete credentials`, status);
    }
    return { accessKeyId, secretAccessKey, sessionToken, expiration };
  }
}


/** The inner XML of the first `<name>` element (STS answers are flat enough for this). */
function xmlBlock(xml: string, name: string): string | undefined {
  const m = new RegExp(`<${name}(?:\\s[^>]*)?>([\\s\\S]*?)</${name}>`).exec(xml);
  return m?.[1];
}

function xmlText(xml: string, name: string): string | undefined {
  const inner = xmlBlock(xml, name);
  if (inner === undefined) return undefined;
  const text = inner
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&#(\d+);/g, (_, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&amp;/g, '&')
    .trim();
  return text === '' ? undefined : text;
}
