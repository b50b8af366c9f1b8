import type { ConfigRule, Configuration } from '../config/registry';
import { privateDirsRule } from '../config/rule-kit';
import { option, type OptionDef } from '../config/types';

const section = 'Delegation tokens';

/** Prefix of every per-provider key, as in Flink (`DelegationTokenProvider.CONFIG_PREFIX`). */
export const PROVIDER_PREFIX = 'security.delegation.token.provider';
/** Prefix of every per-receiver key (`DelegationTokenReceiver.CONFIG_PREFIX`). */
export const RECEIVER_PREFIX = 'security.delegation.token.receiver';

/**
 * Options of the delegation-token framework. The `security.*` keys are Flink's own names and
 * defaults (SecurityOptions, FLINK-40008, FLINK-40019), so one config file can serve both; the
 * `gateway.tokens.*` keys are the gateway's (registration store and job watcher).
 */
export const tokenOptions = {
  enabled: option({
    key: 'security.delegation.tokens.enabled',
    deprecatedKeys: ['security.kerberos.fetch.delegation-token'],
    type: 'boolean',
    default: true,
    section,
    description:
      "Flink's switch of its delegation-token framework; the default of gateway.tokens.enabled, so that a cluster configuration that turns Flink's tokens off (read through gateway.cluster.flink-conf) turns the gateway's off too unless gateway.tokens.enabled says otherwise.",
  }),
  gatewayEnabled: option({
    key: 'gateway.tokens.enabled',
    type: 'boolean',
    section,
    description:
      "Whether the gateway's delegation-token framework runs at all. When false, no provider or receiver is loaded and job registration is a no-op (no store, no job watcher). Default: the value of security.delegation.tokens.enabled (true).",
  }),
  renewalRatio: option({
    key: 'security.delegation.tokens.renewal.time-ratio',
    deprecatedKeys: ['security.kerberos.tokens.renewal.time-ratio'],
    type: 'double',
    default: 0.75,
    section,
    description:
      'When to renew, as a fraction of the remaining validity of the earliest-expiring token: a token valid for 12 h more is re-obtained after 9 h. Any number Flink accepts is accepted; the gateway uses it within 0.01 … 1 (a warning at start says so when it is outside), since 0 or less would renew back to back and more than 1 after expiry.',
  }),
  retryInitialBackoff: option({
    key: 'security.delegation.tokens.renewal.retry.initial.backoff',
    // Flink 1.20–2.3's only retry key (a fixed wait), kept by FLINK-40008 as a deprecated alias.
    deprecatedKeys: ['security.delegation.tokens.renewal.retry.backoff', 'security.kerberos.tokens.renewal.retry.backoff'],
    type: 'duration',
    default: 10_000,
    min: 1,
    section,
    description:
      "First wait after a failed obtain cycle; doubles on each further failure up to the max backoff, with ±50 % jitter, and never beyond a third of the remaining validity of the current tokens. Read also under Flink 1.20–2.3's security.delegation.tokens.renewal.retry.backoff (and its older security.kerberos.tokens.renewal.retry.backoff), as Flink's master reads them.",
  }),
  retryMaxBackoff: option({
    key: 'security.delegation.tokens.renewal.retry.max.backoff',
    type: 'duration',
    default: 300_000,
    min: 1,
    section,
    description: 'Longest wait between retries of a failed obtain cycle.',
  }),
  reobtainCooldown: option({
    key: 'security.delegation.tokens.reobtain.cooldown',
    type: 'duration',
    default: 30_000,
    min: 0,
    section,
    description:
      'Minimum time between two on-demand obtain cycles (such as those a provider requests when a job is registered), measured from the start of the cycle that served the previous request. Requests within the cooldown are coalesced into one deferred cycle. Does not affect periodic renewal.',
  }),
  providerEnabled: option({
    key: `${PROVIDER_PREFIX}.<name>.enabled`,
    type: 'boolean',
    default: true,
    section,
    description: 'Switches one provider, and the receiver of the same name, on or off.',
  }),
  storeDir: option({
    key: 'gateway.tokens.store-dir',
    type: 'string',
    section,
    description:
      'Directory of the job-registration store (job id, redacted job configuration, artifact provenance), used to register running jobs again after a gateway restart. Default: <gateway.artifacts.cache-dir>/registrations. Put it on a persistent volume.',
  }),
  watchInterval: option({
    key: 'gateway.tokens.watcher.interval',
    type: 'duration',
    default: 5_000,
    min: 10,
    section,
    description:
      'How often the job watcher reads /v1/jobs/overview to unregister jobs that reached a globally terminal state (FINISHED, FAILED, CANCELED). It also finds jobs the gateway did not register (gateway.tokens.unregistered-jobs), so it reads whenever delegation tokens are on.',
  }),
  watchMaxBackoff: option({
    key: 'gateway.tokens.watcher.max-backoff',
    type: 'duration',
    default: 60_000,
    min: 10,
    section,
    description:
      'Longest wait between reads while the JobManager is unreachable or failing (the interval doubles per failed read). An unreachable JobManager never makes a job count as gone.',
  }),
  watchMissingReads: option({
    key: 'gateway.tokens.watcher.missing-reads',
    type: 'int',
    default: 3,
    min: 1,
    section,
    description:
      'A registered job absent from /v1/jobs/overview counts as gone (and is unregistered) only after this many successful reads without it, and only once the missing grace period has passed too.',
  }),
  bridgeEnabled: option({
    key: 'gateway.tokens.bridge-enabled',
    type: 'boolean',
    default: true,
    section,
    description:
      'Serve GET /gateway/v1/tokens/bridge: the latest tokens of every provider, for the Flink-side token bridge (flink-jar-gateway-token-bridge, docs/adr/0005-token-delivery.md), to loopback clients presenting the bridge secret only. When the gateway starts the embedded cluster, that cluster is configured to pull from it.',
  }),
  bridgeSecretFile: option({
    key: 'gateway.tokens.bridge-secret-file',
    type: 'string',
    section,
    description:
      "File holding the token bridge's shared secret (one line, printable ASCII), re-read when it changes. Created with 32 random bytes (base64url, mode 0600) when missing. Point the Flink side's security.delegation.token.provider.gateway.secret-file at the same file. Default: <gateway.tokens.store-dir>/bridge-secret.",
  }),
  fileReceiverDir: option({
    key: 'gateway.tokens.file-receiver.dir',
    type: 'string',
    section,
    description:
      "When set, every registered job's tokens are also written to <dir>/<jobId>.json (versioned JSON, mode 0600, replaced atomically on every renewal) for setups that mount a shared volume into the TaskManagers; a job's file is removed when the job is unregistered (it ended, or its start was rolled back), not when the gateway merely stops.",
  }),
  unregisteredJobs: option({
    key: 'gateway.tokens.unregistered-jobs',
    type: 'enum',
    default: 'register',
    values: ['register', 'cancel', 'ignore'],
    section,
    description:
      "What happens to a job the gateway did not register before it started: one submitted with POST /v1/jobs (flink run, the SQL gateway), one submitted to the JobManager past the gateway, or one whose registration store was lost (docs/adr/0010-every-running-job-is-registered-or-refused.md). register: the job watcher discovers it and registers it with every provider under the reserved principal gateway:cluster-default with gateway.tokens.cluster-default-configuration (a POST /v1/jobs job is registered before its answer is relayed); a job a provider refuses is cancelled. cancel: POST /v1/jobs is refused (403 GW_POLICY_UNREGISTERED_JOBS) and every discovered job is cancelled. ignore: such jobs run without tokens (audited and logged as a warning, never silently) — only for a JobManager that other gateways share, such as a test suite's. Each discovery, registration and cancellation has an audit line.",
  }),
  clusterDefaultConfiguration: option({
    key: 'gateway.tokens.cluster-default-configuration',
    type: 'map',
    section,
    description:
      'The cluster default scope: the job configuration (job-request keys such as security.delegation.job.oauth2.scope) every job registered by discovery is registered with, redacted like any registration. Providers check it against their allow-lists for the principal gateway:cluster-default (entries such as gateway:cluster-default=<scope>, or entries for everyone). Empty: such jobs ask for nothing and get what a provider gives a job that asks for nothing.',
  }),
  jobGraphMaxSize: option({
    key: 'gateway.tokens.job-graph.max-size',
    type: 'memory',
    default: 64 * 1024 * 1024,
    min: 1024,
    section,
    description:
      'The largest serialised job graph (the jobGraphFileName part of POST /v1/jobs, what flink run and the SQL gateway send) the gateway reads to register the job with its own jobConfiguration before the JobManager gets it; it is held in memory while read (jars and artifacts in the same body are not). A larger graph is refused with 400 GW_JOB_GRAPH_UNREADABLE. Read only while delegation tokens are on and gateway.tokens.unregistered-jobs is register.',
  }),
  absentRetention: option({
    key: 'gateway.tokens.absent-retention',
    type: 'duration',
    default: 24 * 3_600_000,
    min: 0,
    section,
    description:
      'How long the stored registration of a job that is gone from the JobManager (or SUSPENDED past resourcemanager.job.timeout) is kept after its providers unregistered it. The same job id listed again within it (a slow HA recovery, a JobManager restored from its job-result store) is registered again with its own stored configuration and principal, never as a discovered job; after it, the record is dropped.',
  }),
  jobLeaderTimeout: option({
    key: 'resourcemanager.job.timeout',
    type: 'duration',
    default: 300_000,
    min: 0,
    section,
    description:
      "Flink's job-leader timeout (its ResourceManager lets a job's leader go after it; FLINK-40019 unregisters the job then): a job the JobManager lists as SUSPENDED this long has its registration ended (its stored record is kept, see gateway.tokens.absent-retention). Read from the cluster configuration like Flink reads it.",
  }),
  watchMissingGrace: option({
    key: 'gateway.tokens.watcher.missing-grace',
    type: 'duration',
    default: 60_000,
    min: 0,
    section,
    description: 'How long a registered job must have been absent from /v1/jobs/overview before it counts as gone.',
  }),
} satisfies Record<string, OptionDef>;

/** The rules across the token options: the directories the gateway keeps registrations and tokens in. */
export const tokenRules: readonly ConfigRule[] = [privateDirsRule([tokenOptions.storeDir, tokenOptions.fileReceiverDir])];

/** Whether the gateway's token framework runs: gateway.tokens.enabled, by default Flink's switch. */
export function tokensEnabled(config: Configuration): boolean {
  return config.getOptional(tokenOptions.gatewayEnabled) ?? config.get(tokenOptions.enabled);
}

/** The renewal ratio the manager uses: Flink accepts any number, a usable one lies in 0.01 … 1. */
export function effectiveRenewalRatio(config: Configuration): { ratio: number; clamped: boolean } {
  const given = config.get(tokenOptions.renewalRatio);
  const ratio = Number.isFinite(given) ? Math.min(1, Math.max(0.01, given)) : 0.75;
  return { ratio, clamped: ratio !== given };
}

/** The job watcher's timing, as configured. */
export function watcherSettings(config: Configuration) {
  return {
    intervalMs: config.get(tokenOptions.watchInterval),
    maxBackoffMs: config.get(tokenOptions.watchMaxBackoff),
    missingReads: config.get(tokenOptions.watchMissingReads),
    missingGraceMs: config.get(tokenOptions.watchMissingGrace),
    suspendedTimeoutMs: config.get(tokenOptions.jobLeaderTimeout),
  };
}
