import type { Logger } from 'pino';
import type { ArtifactsFeature } from '../artifacts/create-artifacts';
import { handoffModeOf } from '../artifacts/options';
import type { AuditLog } from '../audit/audit-log';
import { JarHandoff } from '../cluster/jar-handoff';
import { JobWatcher } from '../cluster/job-watcher';
import type { JobManagerClient } from '../cluster/jobmanager-client';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';
import type { TokenManager } from '../plugin-kit/token-spi';
import { jobSecretRule } from '../tokens/job-configuration';
import { tokenOptions, watcherSettings } from '../tokens/token-options';
import type { JobClaimBook } from './job-claims';
import { ApplicationRuns } from './application-runs';
import { JobRegistrations } from './job-registrations';
import type { RegistrationStore } from './registration-store';
import { RemoteJars } from './remote-jars';
import { RunService, type RunServiceOptions } from './run-service';
import { UnregisteredJobs } from './unregistered-jobs';

export interface SubmissionFeature {
  registrations: JobRegistrations;
  /** Jobs nobody registered before they started; absent without delegation tokens. */
  unregistered: UnregisteredJobs | undefined;
  handoff: JarHandoff;
  runs: RunService;
  /** Follows the registered jobs until they end; absent without delegation tokens. */
  watcher: JobWatcher | undefined;
}

/**
 * The run pipeline and the registrations of running jobs: registrations (persisted in `store` when
 * delegation tokens are on), jobs nobody registered (ADR 0010), the hand-off of jars to the
 * JobManager, the run service, and the watcher that ends a registration when its job ends.
 */
export function createSubmission(o: {
  config: Configuration;
  logger: Logger;
  tokens: TokenManager;
  tokenLog: Logger;
  cluster: JobManagerClient;
  uploadDir: string | undefined;
  artifacts: Pick<ArtifactsFeature, 'fetcher' | 'cache'>;
  /** Whether remote jars are served at all (some filesystem plugin is loaded). */
  remoteJars: boolean;
  audit: AuditLog;
  store: RegistrationStore | undefined;
  claims: JobClaimBook;
  /** Whether this gateway registers jobs now (HA: only while its JobManager leads). */
  active: (() => boolean) | undefined;
  onSubmission: NonNullable<RunServiceOptions['onSubmission']>;
  resources: AsyncDisposableStack;
}): SubmissionFeature {
  const { config, logger, tokens, tokenLog, cluster, store, audit } = o;
  const registrations = new JobRegistrations({
    tokens,
    ...(store ? { store } : {}),
    absentRetentionMs: config.get(tokenOptions.absentRetention),
    isSensitive: jobSecretRule(config.registry, tokens.jobRequestKeys()),
    cluster: config.cluster,
    log: tokenLog,
    ...(o.active ? { active: o.active } : {}),
  });
  const handoff = new JarHandoff(handoffModeOf(config, o.uploadDir), cluster, o.uploadDir, logger.child({ component: 'handoff' }));
  // Jobs nobody registered before they started are registered with the cluster default scope or cancelled (ADR 0010).
  const defaults = config.getOptional(tokenOptions.clusterDefaultConfiguration) ?? {};
  const policy = config.get(tokenOptions.unregisteredJobs);
  const maxGraphBytes = config.get(tokenOptions.jobGraphMaxSize);
  // Flink 2.3 applications: job ids as Flink derives them, later jobs registered, jars kept until the end.
  const applications = o.resources.adopt(
    new ApplicationRuns({
      cluster,
      registrations,
      intervalMs: config.get(tokenOptions.watchInterval),
      log: logger.child({ component: 'applications' }),
    }),
    (a) => a.close(),
  );
  const unregistered = store
    ? new UnregisteredJobs({
        policy,
        registrations,
        cluster,
        defaults,
        audit,
        log: logger.child({ component: 'unregistered-jobs' }),
        maxGraphBytes,
        applications,
      })
    : undefined;
  if (unregistered?.policy === 'ignore')
    tokenLog.warn(
      'gateway.tokens.unregistered-jobs: ignore — jobs the gateway did not register run without delegation tokens (each is audited)',
    );
  const runs = new RunService({
    cluster,
    applications,
    claims: o.claims,
    jarUriEnabled: config.get(coreOptions.jarUriEnable),
    ...(o.remoteJars ? { remoteJars: new RemoteJars(o.artifacts.fetcher, handoff, o.artifacts.cache) } : {}),
    dedupeRetentionMs: config.get(coreOptions.runDedupeRetention),
    jarBudget: {
      maxCount: config.get(coreOptions.jarsMaxCountPerPrincipal),
      maxBytes: config.get(coreOptions.jarsMaxSizePerPrincipal),
      maxTotalBytes: config.get(coreOptions.jarsMaxTotalSize),
    },
    placeholderMaxBytes: config.get(coreOptions.fetchedOnlyMaxUploadSize),
    registrations,
    policyMode: config.get(coreOptions.policyMode),
    audit,
    onSubmission: o.onSubmission,
  });
  const watching = {
    cluster,
    jobs: registrations,
    ...(unregistered ? { discovery: unregistered } : {}),
    ...watcherSettings(config),
    log: logger.child({ component: 'job-watcher' }),
  };
  const watcher = store ? o.resources.adopt(new JobWatcher(watching), (w) => w.stop()) : undefined;
  return { registrations, unregistered, handoff, runs, watcher };
}
