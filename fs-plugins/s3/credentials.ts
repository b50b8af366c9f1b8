import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { fromEnv } from '@aws-sdk/credential-provider-env';
import { fromHttp } from '@aws-sdk/credential-provider-http';
import { fromIni } from '@aws-sdk/credential-provider-ini';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { fromTokenFile } from '@aws-sdk/credential-provider-web-identity';
import { fromContainerMetadata, fromInstanceMetadata } from '@smithy/credential-provider-imds';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import type { Logger } from 'pino';
import type { ConnectGuard } from '../../src/plugin-kit';
import type { AssumedRoleSpec, CredentialSource, StsTarget } from './bucket-settings';
import { Sts } from './sts';

/** Session credentials are renewed this long before they end (the SDK's own margin). */
const RENEW_BEFORE_MS = 5 * 60_000;
const STS_TIMEOUT_MS = 30_000;

export interface CredentialDeps {
  guard: ConnectGuard;
  log: Logger;
  /** PEM CA bundle; undefined = system CAs. */
  ca?: string | undefined;
  /** Every STS client made, so that `close` releases them. */
  stsClients: Set<Sts>;
}

/** The bucket's credentials as the SDK takes them; `anonymous` = unsigned requests; undefined = the SDK's own default chain. */
export type BuiltCredentials = AwsCredentialIdentityProvider | 'anonymous' | undefined;

/**
 * Builds the SDK credential provider for a chain from the configuration. Each link is the AWS SDK's
 * own provider (fromEnv, fromTokenFile, fromIni, fromHttp, fromInstanceMetadata, defaultProvider),
 * except AssumeRole, which is the plugin's STS client signed with the link's base chain. Every STS
 * call — AssumeRole, and the web identity exchange of IRSA — goes to the bucket's STS target.
 */
export function buildCredentials(chain: CredentialSource[], sts: StsTarget, deps: CredentialDeps): BuiltCredentials {
  // No configuration at all: leave the SDK's default chain to the client, as without these options.
  if (chain.length === 1 && chain[0]!.kind === 'default-chain' && sts.endpoint === undefined) return undefined;
  if (chain.length === 1 && chain[0]!.kind === 'anonymous') return 'anonymous';
  const links = chain.filter((s) => s.kind !== 'anonymous').map((s) => link(s, sts, deps));
  return links.length === 1 ? links[0]! : firstThatAnswers(links);
}

function link(source: CredentialSource, sts: StsTarget, deps: CredentialDeps): AwsCredentialIdentityProvider {
  const webIdentity = () => webIdentityAssumer(sts, deps);
  switch (source.kind) {
    case 'static': {
      const identity: AwsCredentialIdentity = {
        accessKeyId: source.accessKeyId,
        secretAccessKey: source.secretAccessKey,
        ...(source.sessionToken !== undefined ? { sessionToken: source.sessionToken } : {}),
      };
      return async () => identity;
    }
    case 'env':
      return fromEnv();
    case 'web-identity':
      return fromTokenFile({ roleAssumerWithWebIdentity: webIdentity() });
    case 'profile':
      return fromIni();
    case 'container':
      return fromHttp({});
    case 'instance':
      return fromInstanceMetadata();
    case 'iam-instance':
      return firstThatAnswers([fromHttp({}), fromContainerMetadata(), fromInstanceMetadata()]);
    case 'default-chain':
      // The chain's web identity step (IRSA) exchanges its token at the configured STS too.
      return defaultProvider({ roleAssumerWithWebIdentity: webIdentity() });
    case 'assumed-role':
      return assumedRole(
        source.role,
        source.base.length === 1 ? link(source.base[0]!, sts, deps) : firstThatAnswers(source.base.map((b) => link(b, sts, deps))),
        sts,
        deps,
      );
    case 'anonymous':
      throw new Error('an anonymous link has no credentials');
  }
}

/** The STS client for one STS target and one signing identity (none for the unsigned web identity call). */
function stsClient(sts: StsTarget, deps: CredentialDeps, credentials?: AwsCredentialIdentityProvider): Sts {
  const port = sts.endpoint ? Number(sts.endpoint.port || (sts.endpoint.protocol === 'http:' ? 80 : 443)) : 443;
  // Node connects to an IP literal without a lookup: check it here; names are checked by the lookup at connect time.
  if (sts.endpoint && isIP(sts.endpoint.hostname.replace(/^\[|\]$/g, ''))) deps.guard.checkHost(sts.endpoint.hostname, port);
  const client = new Sts({
    ...(sts.endpoint ? { endpoint: sts.endpoint } : {}),
    region: sts.region,
    ...(credentials ? { credentials } : {}),
    timeoutMs: STS_TIMEOUT_MS,
    ca: deps.ca,
    lookup: deps.guard.lookupFor(port),
  });
  deps.stsClients.add(client);
  return client;
}

/** What `fromTokenFile` calls with the token it read (re-read on every renewal: the kubelet rotates it). */
function webIdentityAssumer(sts: StsTarget, deps: CredentialDeps) {
  let client: Sts | undefined;
  return async (params: {
    RoleArn: string;
    RoleSessionName: string;
    WebIdentityToken: string;
    DurationSeconds?: number;
  }): Promise<AwsCredentialIdentity> => {
    client ??= stsClient(sts, deps);
    const c = await client.assumeRoleWithWebIdentity(
      params.RoleArn,
      params.RoleSessionName,
      params.WebIdentityToken,
      params.DurationSeconds,
    );
    return {
      accessKeyId: c.accessKeyId,
      secretAccessKey: c.secretAccessKey,
      sessionToken: c.sessionToken,
      expiration: new Date(c.expiration),
    };
  };
}

/** AssumeRole signed with `base`, renewed before it ends; concurrent callers share one call. */
function assumedRole(
  role: AssumedRoleSpec,
  base: AwsCredentialIdentityProvider,
  sts: StsTarget,
  deps: CredentialDeps,
): AwsCredentialIdentityProvider {
  let client: Sts | undefined;
  let current: AwsCredentialIdentity | undefined;
  let pending: Promise<AwsCredentialIdentity> | undefined;
  const fresh = () =>
    current !== undefined && (current.expiration === undefined || current.expiration.getTime() - Date.now() > RENEW_BEFORE_MS);
  return async () => {
    if (fresh()) return current!;
    pending ??= (async () => {
      try {
        client ??= stsClient(sts, deps, base);
        const extras = {
          ...(role.externalId !== undefined ? { externalId: role.externalId } : {}),
          ...(role.policy !== undefined ? { policy: role.policy } : {}),
        };
        const c = await client.assumeRole(role.arn, role.sessionName, role.durationSeconds, extras);
        current = {
          accessKeyId: c.accessKeyId,
          secretAccessKey: c.secretAccessKey,
          sessionToken: c.sessionToken,
          expiration: new Date(c.expiration),
        };
        deps.log.info(
          { roleArn: role.arn, sessionName: role.sessionName, expiration: current.expiration?.toISOString() },
          's3 assumed role',
        );
        return current;
      } finally {
        pending = undefined;
      }
    })();
    return pending;
  };
}

/** Hadoop's provider list: the first link that yields credentials; the error of the last one if none does. */
function firstThatAnswers(links: AwsCredentialIdentityProvider[]): AwsCredentialIdentityProvider {
  return async (props) => {
    let last: unknown;
    for (const l of links) {
      try {
        return await l(props);
      } catch (err) {
        last = err;
      }
    }
    throw last ?? new Error('no credential provider');
  };
}

/** A stable, secret-free identity of a chain, for sharing one S3 client among buckets with the same credentials. */
export function chainId(chain: CredentialSource[], sts: StsTarget): string {
  const digest = (text: string) => createHash('sha256').update(text).digest('hex');
  const plain = JSON.stringify([chain, sts.endpoint?.href ?? '', sts.region]);
  return digest(plain);
}
