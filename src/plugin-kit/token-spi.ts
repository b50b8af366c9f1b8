/**
 * The delegation-token SPI, a TypeScript port of Flink's framework with the per-job extension of
 * FLINK-40019 / PR #28639. A provider obtains
 * tokens with the cluster's credentials; a receiver applies them; the manager schedules obtain
 * cycles, renewal, re-obtain with cooldown, and per-job registration.
 *
 * Threading in Node: there are no threads, but every `await` interleaves. `registerJob` and
 * `unregisterJob` may run while `obtainDelegationTokens` is in flight, so per-job state must be
 * updated before yielding and read consistently after.
 */

/** One provider's result. `tokens` is opaque to the manager; `validUntil` is epoch milliseconds. */
export interface ObtainedDelegationTokens {
  tokens: Uint8Array;
  /** Absent = valid forever (no renewal scheduled for this provider). */
  validUntil?: number;
}

/** Given to providers at init: asks the manager for an early obtain cycle (coalesced, with cooldown). */
export interface DelegationTokenManagerCallback {
  /** Returns at once; may be called from anywhere after `init`. */
  reobtainDelegationTokens(): void;
}

/** A provider's view of its configuration: keys relative to `security.delegation.token.provider.<name>.`. */
export interface ProviderConfig {
  /** e.g. `get('region')` reads `security.delegation.token.provider.<name>.region`. */
  get(relativeKey: string): string | undefined;
  /** The whole gateway configuration, as strings (for shared keys such as `s3.endpoint`). */
  raw(key: string): string | undefined;
}

/**
 * A job's configuration as the provider sees it: the job's effective configuration (the cluster's
 * Flink configuration, when the gateway reads it, overlaid with the run request's), string values,
 * every secret removed (see `jobRequestKeys`). The registration store holds exactly this.
 */
export type JobConfiguration = Readonly<Record<string, string>>;

/**
 * A delegation-token provider. One instance per provider for the manager's lifetime.
 *
 * @example
 * const provider: DelegationTokenProvider = {
 *   serviceName: 'oauth2',
 *   async init(config, callback) { this.endpoint = config.get('token-endpoint'); },
 *   delegationTokensRequired: () => true,
 *   async obtainDelegationTokens() { return { tokens: encode(await fetchToken()), validUntil: Date.now() + 3600_000 }; },
 * };
 */
export interface DelegationTokenProvider {
  /** Unique; matches the receiver, the `enabled` switch and the container entry. */
  readonly serviceName: string;
  /**
   * The keys of a job's configuration this provider reads in `registerJob` to learn what the job asks
   * for (exact keys; no prefixes, so no declaration can reveal a family of secrets). Their values
   * reach it even where the name looks like
   * a secret's (`security.delegation.token.*`, say): they are scopes, not credentials. Every other key
   * whose name Flink counts as sensitive (password, secret, token, ...) is removed first, and a
   * declared-sensitive option always is. The built-in providers use `security.delegation.job.<name>.*`,
   * a convention rather than a rule.
   */
  readonly jobRequestKeys?: readonly string[];
  /** Called once, only when the provider is enabled. Keep `callback` to request re-obtains later. */
  init(config: ProviderConfig, callback: DelegationTokenManagerCallback): void | Promise<void>;
  /** Checked before each obtain; false skips this provider this cycle (no tokens, no renewal date). */
  delegationTokensRequired(): boolean | Promise<boolean>;
  /** Obtains tokens (for the cluster, and for every registered job whose state it holds). */
  obtainDelegationTokens(): Promise<ObtainedDelegationTokens>;
  /**
   * A job is about to start. Must be idempotent (re-registration after a gateway restart) and should
   * not throw: a throw rejects the job (it never starts) and rolls back every provider. Record the
   * job's state BEFORE calling `callback.reobtainDelegationTokens()`. Validate what the job asks for
   * against the administrator's allow-list here, and throw with a clear message if it is not allowed.
   */
  registerJob?(jobId: string, jobConfiguration: JobConfiguration, context: JobContext): void | Promise<void>;
  /** The job reached a globally terminal state (or its start was rolled back). Idempotent. */
  unregisterJob?(jobId: string): void | Promise<void>;
  /** Called at most once at shutdown; may overlap an in-flight obtain. */
  close?(): void | Promise<void>;
}

/**
 * Who submitted a job, for allow-lists tied to principals (`<principal>=<item>` entries, see
 * `PrincipalAllowList`). `anonymous` when authentication is off.
 */
export interface JobContext {
  /**
   * `token:<name>`, `cert:<subject CN>` or `anonymous`; or `gateway:cluster-default` for a job no
   * caller registered (a job graph from POST /v1/jobs, a job found running on the JobManager), which
   * is registered with `gateway.tokens.cluster-default-configuration` (docs/adr/0010).
   */
  readonly principal: string;
}

/** Applies one provider's tokens where they are needed (the gateway's fs-plugins, a file, a bridge). */
export interface DelegationTokenReceiver {
  /** Must equal the provider's `serviceName`. */
  readonly serviceName: string;
  init(config: ProviderConfig): void | Promise<void>;
  onNewTokensObtained(tokens: Uint8Array): void | Promise<void>;
}

/**
 * The container handed to listeners after a successful cycle: versioned JSON
 * `{"version":1,"tokens":{"<serviceName>":"<base64>"}}` instead of Java serialization.
 */
export interface TokenContainer {
  version: 1;
  tokens: Record<string, string>;
}

export interface TokenManagerListener {
  onNewTokensObtained(container: TokenContainer): void | Promise<void>;
}

/**
 * Told about the manager's per-job registry, for delivery that addresses tokens by job (the token
 * bridge and the file receiver in `src/tokens/receivers/`). Called outside the providers; a throw
 * or rejection is logged and ignored.
 */
export interface TokenJobListener {
  /** Before any provider sees the job (a first registration, or again after a restart). */
  jobRegistering(jobId: string): void | Promise<void>;
  /**
   * After every provider dropped the job. `unregistered`: it ended, was rolled back or dropped at
   * start; `session-end`: the manager's session ended (gateway shutdown) and the job may still run.
   */
  jobUnregistered(jobId: string, cause: 'unregistered' | 'session-end'): void | Promise<void>;
}

/** Status for GET /gateway/v1/tokens — never a token value. */
export interface TokenStatus {
  enabled: boolean;
  providers: {
    serviceName: string;
    lastObtainAt?: string;
    validUntil?: string;
    lastError?: string;
    /**
     * False after the provider failed unexpectedly in `registerJob` (threw something that is not a
     * `JobRefusedError`: a bug), until its next `registerJob` succeeds.
     */
    healthy: boolean;
    /** The unexpected failure that made it unhealthy (a message, never a token). */
    failure?: { at: string; message: string };
  }[];
  nextRenewalAt?: string;
  registeredJobs: string[];
  /** The latest failure of an obtain cycle or a job registration (a message, never a token). */
  lastError?: { at: string; message: string };
}

/** Thrown by `TokenManager.registerJob` when a provider refuses a job (400), or fails unexpectedly (500). */
export interface TokenRegistrationFailure extends Error {
  code: 'GW_TOKENS_REJECTED' | 'GW_TOKENS_PROVIDER_FAILED';
  provider: string;
}

/** What the submission pipeline and the job watcher use. */
export interface TokenManager {
  start(listener?: TokenManagerListener): Promise<void>;
  /** End of a serving session: stops timers, unregisters the session's jobs. */
  stop(): Promise<void>;
  /** Process shutdown: closes providers exactly once. */
  close(): Promise<void>;
  reobtainDelegationTokens(): void;
  /** Rejects (TokenRegistrationFailure) when a provider refuses; a first registration is then rolled back everywhere. */
  registerJob(jobId: string, jobConfiguration: JobConfiguration, context?: JobContext): Promise<void>;
  /** Never throws; per-provider failures are logged and the job is dropped anyway. */
  unregisterJob(jobId: string): Promise<void>;
  /** The union of the loaded providers' `jobRequestKeys`. */
  jobRequestKeys(): readonly string[];
  status(): TokenStatus;
  /**
   * Epoch ms (wall clock) when the tokens are expected to change next: now while an obtain cycle
   * runs, else the pending cycle (renewal, retry, or a re-obtain a provider asked for — a job
   * waiting for its first tokens); undefined when nothing is scheduled. The token bridge uses it
   * to call back soon only while something is about to be delivered.
   */
  nextUpdateAt(): number | undefined;
}
