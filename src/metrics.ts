import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The gateway's Prometheus metrics (GET /gateway/v1/metrics). Labels are bounded sets only — never
 * a URI, a job id or anything a client controls.
 */
export class Metrics {
  readonly registry = new Registry();

  readonly submissions = new Counter({
    name: 'flink_gateway_submissions_total',
    help: 'Runs handled by the gateway, by jar source (upload | uri) and outcome (accepted | rejected | failed | deduplicated).',
    labelNames: ['source', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly fetchBytes = new Counter({
    name: 'flink_gateway_fetch_bytes_total',
    help: 'Bytes downloaded by jar fetches, by plugin.',
    labelNames: ['plugin'] as const,
    registers: [this.registry],
  });

  readonly fetchDuration = new Histogram({
    name: 'flink_gateway_fetch_duration_seconds',
    help: 'Duration of jar fetches (including revalidation), by plugin and result (done | cached | failed).',
    labelNames: ['plugin', 'result'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });

  readonly cache = new Counter({
    name: 'flink_gateway_cache_lookups_total',
    help: 'Jar cache lookups: hit (revalidated unchanged or pinned), miss (downloaded).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly errors = new Counter({
    name: 'flink_gateway_errors_total',
    help: 'Error answers by gateway error code (GW_*) and status: alert on GW_AUTH_FORBIDDEN, GW_FETCH_RESTRICTED_HOST or GW_FETCH_URI_NOT_ALLOWED spikes (probing), GW_CLUSTER_* (JobManager trouble).',
    labelNames: ['code', 'status'] as const,
    registers: [this.registry],
  });

  readonly passThrough = new Histogram({
    name: 'flink_gateway_pass_through_duration_seconds',
    help: 'Time to response headers of requests passed through to the JobManager, by status class.',
    labelNames: ['status_class'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
    registers: [this.registry],
  });

  readonly haRecordsRejected = new Counter({
    name: 'flink_gateway_ha_records_rejected_total',
    help: 'Records read from the shared HA store that failed their integrity check and were ignored, by kind (registration | job-claim) and reason (unsealed | unknown-version | wrong-kind | bad-mac | malformed). Alert on any: forged records, or replicas with different gateway.ha.shared-secret values.',
    labelNames: ['kind', 'reason'] as const,
    registers: [this.registry],
  });

  /** One finished fetch (the fetcher's onFetch): its duration, the bytes downloaded, a cache hit or miss. */
  readonly observeFetch = (plugin: string, result: 'done' | 'cached' | 'failed', seconds: number, bytes: number): void => {
    this.fetchDuration.observe({ plugin, result }, seconds);
    if (bytes > 0) this.fetchBytes.inc({ plugin }, bytes);
    if (result !== 'failed') this.cache.inc({ result: result === 'cached' ? 'hit' : 'miss' });
  };

  constructor(gauges: {
    fetchQueueDepth: () => number;
    cacheEntries: () => number;
    registeredJobs: () => number;
    /** Running jobs whose re-registration after a restart a provider refused (retried with backoff). */
    restorePending?: () => number;
    tokenProviders: () => { serviceName: string; lastObtainAt?: string; validUntil?: string; lastError?: string }[];
    nextRenewal: () => string | undefined;
  }) {
    collectDefaultMetrics({ register: this.registry, prefix: 'flink_gateway_' });
    new Gauge({
      name: 'flink_gateway_fetch_queue_depth',
      help: 'Fetches waiting for a slot.',
      registers: [this.registry],
      collect() {
        this.set(gauges.fetchQueueDepth());
      },
    });
    new Gauge({
      name: 'flink_gateway_cache_entries',
      help: 'URIs in the jar cache index.',
      registers: [this.registry],
      collect() {
        this.set(gauges.cacheEntries());
      },
    });
    new Gauge({
      name: 'flink_gateway_registered_jobs',
      help: 'Jobs registered with the delegation-token manager.',
      registers: [this.registry],
      collect() {
        this.set(gauges.registeredJobs());
      },
    });
    new Gauge({
      name: 'flink_gateway_token_restore_pending',
      help: 'Running jobs a delegation-token provider refused to register again after a gateway restart; retried with backoff. Alert when above 0 for long.',
      registers: [this.registry],
      collect() {
        this.set(gauges.restorePending?.() ?? 0);
      },
    });
    new Gauge({
      name: 'flink_gateway_token_provider_error',
      help: "1 when the provider's last obtain failed, by provider.",
      labelNames: ['provider'],
      registers: [this.registry],
      collect() {
        for (const p of gauges.tokenProviders()) this.set({ provider: p.serviceName }, p.lastError ? 1 : 0);
      },
    });
    new Gauge({
      name: 'flink_gateway_token_last_obtain_timestamp_seconds',
      help: 'When each provider last obtained tokens successfully (epoch seconds).',
      labelNames: ['provider'],
      registers: [this.registry],
      collect() {
        for (const p of gauges.tokenProviders())
          if (p.lastObtainAt) this.set({ provider: p.serviceName }, Date.parse(p.lastObtainAt) / 1000);
      },
    });
    new Gauge({
      name: 'flink_gateway_token_valid_until_timestamp_seconds',
      help: "Expiry of each provider's current tokens (epoch seconds); absent when they do not expire.",
      labelNames: ['provider'],
      registers: [this.registry],
      collect() {
        for (const p of gauges.tokenProviders()) if (p.validUntil) this.set({ provider: p.serviceName }, Date.parse(p.validUntil) / 1000);
      },
    });
    new Gauge({
      name: 'flink_gateway_token_next_renewal_timestamp_seconds',
      help: 'When the next token obtain cycle is due (epoch seconds); absent when none is scheduled.',
      registers: [this.registry],
      collect() {
        const next = gauges.nextRenewal();
        if (next) this.set(Date.parse(next) / 1000);
      },
    });
  }

  /** 2xx → "2xx", etc. */
  static statusClass(status: number): string {
    return `${Math.floor(status / 100)}xx`;
  }
}
