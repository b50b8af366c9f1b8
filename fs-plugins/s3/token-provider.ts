import type { ConfigRule, OptionDef } from '../../src/plugin-kit';
import { JobRefusedError } from '../../src/plugin-kit';
import type { JobConfiguration, JobContext, ObtainedDelegationTokens, ProviderConfig } from '../../src/plugin-kit';
import {
  JOB_REQUEST_PREFIX,
  JobScopedProvider,
  PROVIDER_TIMEOUT_DEFAULT_MS,
  allOrNone,
  allOrNoneRule,
  httpsUnlessLoopback,
  earliest,
  jobValue,
  obtainedTokens,
  parseEndpoint,
  providerKey,
  providerSection,
  providerTimeoutOption,
  readProviderOptions,
  type BuiltInTokenProvider,
  type ProviderDeps,
  PrincipalAllowList,
} from '../../src/plugin-kit';
import { type SessionCredentials, Sts } from './sts';

const NAME = 's3';
const SECTION = providerSection(NAME);

/** The job configuration key with which a job asks for an IAM role (its ARN) instead of the cluster's session. */
export const S3_JOB_ROLE_ARN_KEY = `${JOB_REQUEST_PREFIX}.${NAME}.role-arn`;

/** The provider's options, under `security.delegation.token.provider.s3.*`. */
export const s3ProviderOptionDefs = {
  accessKey: {
    key: providerKey(NAME, 'access-key'),
    type: 'string',
    // An identifier rather than a secret, but the registry's heuristic treats it as one anyway, and
    // there is no reason to print it.
    sensitive: true,
    section: SECTION,
    description: "Access key id of the cluster's long-lived IAM user. With `secret-key` it activates the provider.",
  },
  secretKey: {
    key: providerKey(NAME, 'secret-key'),
    type: 'string',
    sensitive: true,
    section: SECTION,
    description: 'Secret access key of `access-key`. Signs the STS calls; never leaves the gateway.',
  },
  useDefaultCredentials: {
    key: providerKey(NAME, 'use-default-credentials'),
    type: 'boolean',
    default: false,
    section: SECTION,
    description:
      "Sign the STS calls with the AWS default credential chain of the gateway's process (environment, IRSA web identity, EKS pod identity, " +
      'the instance profile) instead of `access-key`/`secret-key`, and activate the provider with it. Only jobs that name a role get credentials ' +
      'then (AssumeRole): GetSessionToken, the cluster session of jobs without a role, needs a long-lived IAM user key, so those jobs get no AWS ' +
      'credentials from this provider. Not together with `access-key`/`secret-key`.',
  },
  endpoint: {
    key: providerKey(NAME, 'endpoint'),
    type: 'url',
    check: httpsUnlessLoopback,
    section: SECTION,
    description: 'STS endpoint. Default `https://sts.<region>.amazonaws.com`; plain http only for loopback (a local test server).',
  },
  region: {
    key: providerKey(NAME, 'region'),
    type: 'string',
    default: 'us-east-1',
    section: SECTION,
    description: 'Region of the STS endpoint (part of the SigV4 signature), also handed to jobs with their credentials.',
  },
  allowedRoleArns: {
    key: providerKey(NAME, 'allowed-role-arns'),
    type: 'list',
    default: [],
    section: SECTION,
    description: `Role ARNs a job may ask for in \`${S3_JOB_ROLE_ARN_KEY}\` (\`;\`-separated, exact match). A job asking for any other role is rejected. An entry may be tied to one principal, \`token:<name>=<item>\` or \`cert:<CN>=<item>\`: then only that submitter may ask for it; entries without a principal are for every submitter.`,
  },
  duration: {
    key: providerKey(NAME, 'duration'),
    type: 'duration',
    default: 3_600_000,
    min: 900_000,
    max: 129_600_000,
    section: SECTION,
    description:
      "Requested lifetime of the session credentials (STS `DurationSeconds`). AssumeRole fails above the role's maximum session " +
      'duration (1 h unless raised); root-account sessions are capped at 1 h.',
  },
  timeout: providerTimeoutOption(NAME, 'one STS call'),
} satisfies Record<string, OptionDef>;

/** The same options as the typed list the options registry takes. */
export const s3ProviderOptions: OptionDef[] = Object.values(s3ProviderOptionDefs);

/** The IAM user's key pair is set as a whole or not at all. */
export const s3ProviderRules: readonly ConfigRule[] = [
  allOrNoneRule([s3ProviderOptionDefs.accessKey, s3ProviderOptionDefs.secretKey], "the IAM user's key pair"),
  {
    keys: [s3ProviderOptionDefs.useDefaultCredentials.key, s3ProviderOptionDefs.accessKey.key],
    description: "the default credential chain or the IAM user's key pair, not both.",
    check(config) {
      const chain = config.getOptional(s3ProviderOptionDefs.useDefaultCredentials) === true;
      return chain && config.getOptional(s3ProviderOptionDefs.accessKey) !== undefined
        ? [
            {
              key: s3ProviderOptionDefs.useDefaultCredentials.key,
              message: `is true while ${s3ProviderOptionDefs.accessKey.key} is set: use one of them`,
            },
          ]
        : [];
    },
  },
];

/** One job's entry in the payload. */
export interface S3JobCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  /** ISO 8601 */
  expiration: string;
  /** Present when the credentials are the job's assumed role, absent for the cluster's session. */
  roleArn?: string;
}

/** What `obtainDelegationTokens()` returns (UTF-8 JSON); receivers parse this. */
export interface S3Tokens {
  version: 1;
  region: string;
  jobs: Record<string, S3JobCredentials>;
}

interface JobState {
  roleArn?: string;
}

/**
 * Per-job AWS session credentials from STS, with the cluster's long-lived key pair.
 *
 * - Every registered job gets credentials: by default the cluster's own session (`GetSessionToken`,
 *   one call per cycle shared by all such jobs, as Flink's S3 provider does); a job that sets
 *   `security.delegation.job.s3.role-arn` gets `AssumeRole` credentials for that role instead,
 *   with the session name `flink-<jobId>` so CloudTrail names the job. The role must be on
 *   `allowed-role-arns`, otherwise `registerJob` throws and the job is rejected.
 * - `delegationTokensRequired()` is true while at least one job is registered and the key pair is set.
 * - `validUntil` is the earliest expiration of the cycle. Credentials are obtained afresh on every
 *   cycle; one failed STS call fails the whole cycle (the manager retries it), so no job runs on a
 *   partial set.
 * - Payload: {@link S3Tokens}.
 * - Without `access-key` and `secret-key` the provider stays inactive (as in Flink); a job that asks
 *   for a role is then rejected, naming the options to set. With `use-default-credentials` the STS
 *   calls are signed by the AWS default credential chain instead (IRSA, pod identity): AssumeRole only.
 */
export class S3DelegationTokenProvider extends JobScopedProvider<JobState, Settings> {
  readonly jobRequestKeys = [S3_JOB_ROLE_ARN_KEY];

  constructor(deps: ProviderDeps = {}) {
    super(NAME, deps, (a, b) => a.roleArn === b.roleArn, 'job registered for AWS session credentials');
  }

  protected configure(config: ProviderConfig): Settings | undefined {
    const d = s3ProviderOptionDefs;
    const o = readProviderOptions(NAME, d, config, s3ProviderRules);
    const chain = o.useDefaultCredentials === true;
    if (!chain && !allOrNone([o.accessKey, o.secretKey])) {
      this.log?.debug('inactive: access-key and secret-key are not set, nor use-default-credentials');
      return undefined;
    }
    const region = o.region ?? 'us-east-1';
    return {
      region,
      durationSeconds: Math.round((o.duration ?? 3_600_000) / 1000),
      allowed: new PrincipalAllowList(o.allowedRoleArns ?? []),
      defaultChain: chain,
      sts: new Sts({
        endpoint: parseEndpoint(d.endpoint.key, o.endpoint ?? `https://sts.${region}.amazonaws.com`),
        region,
        ...(chain ? {} : { credentials: { accessKeyId: o.accessKey!, secretAccessKey: o.secretKey! } }),
        timeoutMs: o.timeout ?? PROVIDER_TIMEOUT_DEFAULT_MS,
        ca: this.ca,
      }),
    };
  }

  /** The requested role (it must be on the allow-list), else the cluster's session. */
  protected stateFor(jobConfiguration: JobConfiguration, context: JobContext, s: Settings | undefined): JobState | undefined {
    const roleArn = jobValue(jobConfiguration, S3_JOB_ROLE_ARN_KEY);
    if (s === undefined) {
      if (roleArn === undefined) return undefined;
      throw new JobRefusedError(
        `the job asks for the IAM role '${roleArn}' (${S3_JOB_ROLE_ARN_KEY}) but the gateway has no AWS credentials for STS ` +
          `(set ${s3ProviderOptionDefs.accessKey.key} and ${s3ProviderOptionDefs.secretKey.key})`,
      );
    }
    if (roleArn !== undefined && !s.allowed.allows(context.principal, roleArn)) {
      throw new JobRefusedError(
        `the IAM role '${roleArn}' (${S3_JOB_ROLE_ARN_KEY}) is not allowed for jobs; an administrator can add it to ` +
          s3ProviderOptionDefs.allowedRoleArns.key,
      );
    }
    return roleArn === undefined ? {} : { roleArn };
  }

  protected describe(state: JobState): Record<string, unknown> {
    return { roleArn: state.roleArn };
  }

  /** One cluster session shared by the jobs without a role; one AssumeRole per job with one. */
  protected async obtainFor(s: Settings, snapshot: ReadonlyMap<string, JobState>): Promise<ObtainedDelegationTokens> {
    // With the default chain there is no cluster session: only jobs naming a role get credentials.
    const served = s.defaultChain ? [...snapshot].filter(([, st]) => st.roleArn !== undefined) : [...snapshot];
    const needsSession = served.some(([, st]) => st.roleArn === undefined);
    const session = needsSession ? withContext(s.sts.getSessionToken(s.durationSeconds), 'GetSessionToken for the cluster') : undefined;
    const entries = await Promise.all(
      served.map(async ([jobId, state]): Promise<[string, S3JobCredentials]> => {
        if (state.roleArn === undefined) return [jobId, toJson(await session!)];
        const c = await withContext(
          s.sts.assumeRole(state.roleArn, sessionName(jobId), s.durationSeconds),
          `AssumeRole of '${state.roleArn}' for job ${jobId}`,
        );
        return [jobId, { ...toJson(c), roleArn: state.roleArn }];
      }),
    );
    // A job unregistered while STS was answering gets nothing.
    const jobs = Object.fromEntries(entries.filter(([jobId]) => this.jobs.has(jobId)));
    const payload: S3Tokens = { version: 1, region: s.region, jobs };
    const validUntil = earliest(Object.values(jobs).map((j) => Date.parse(j.expiration)));
    return obtainedTokens(payload, validUntil);
  }

  protected override async release(): Promise<void> {
    await this.settings?.sts.close();
  }
}

interface Settings {
  sts: Sts;
  region: string;
  durationSeconds: number;
  allowed: PrincipalAllowList;
  /** Signed by the default credential chain: AssumeRole only, no cluster session. */
  defaultChain: boolean;
}

async function withContext<T>(p: Promise<T>, what: string): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw new Error(`${what} failed: ${(err as Error).message}`, { cause: err });
  }
}

function toJson(c: SessionCredentials): S3JobCredentials {
  return {
    accessKeyId: c.accessKeyId,
    secretAccessKey: c.secretAccessKey,
    sessionToken: c.sessionToken,
    expiration: new Date(c.expiration).toISOString(),
  };
}

/** STS `RoleSessionName`: 2–64 characters of `[\w+=,.@-]`. */
export function sessionName(jobId: string): string {
  return `flink-${jobId.replace(/[^\w+=,.@-]/g, '_')}`.slice(0, 64);
}

/** The `s3` provider for the composition root. */
export const s3TokenProvider: BuiltInTokenProvider = {
  serviceName: NAME,
  options: s3ProviderOptions,
  rules: s3ProviderRules,
  create: (deps) => new S3DelegationTokenProvider(deps),
};
