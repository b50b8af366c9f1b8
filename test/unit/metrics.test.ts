import { Metrics } from '../../src/metrics';

describe('Metrics', () => {
  it('exposes token and queue gauges from the services, with bounded labels only', async () => {
    const m = new Metrics({
      fetchQueueDepth: () => 3,
      cacheEntries: () => 7,
      registeredJobs: () => 2,
      tokenProviders: () => [
        { serviceName: 'oauth2', lastObtainAt: '2026-11-29T20:00:00.000Z', validUntil: '2026-11-29T21:00:00.000Z' },
        { serviceName: 's3', lastError: 'AccessDenied' },
      ],
      nextRenewal: () => '2026-11-29T20:45:00.000Z',
    });
    m.submissions.inc({ source: 'uri', outcome: 'accepted' });
    const text = await m.registry.metrics();
    expect(text).toContain('flink_gateway_fetch_queue_depth 3');
    expect(text).toContain('flink_gateway_cache_entries 7');
    expect(text).toContain('flink_gateway_registered_jobs 2');
    expect(text).toContain('flink_gateway_token_provider_error{provider="s3"} 1');
    expect(text).toContain(
      `flink_gateway_token_last_obtain_timestamp_seconds{provider="oauth2"} ${Date.parse('2026-11-29T20:00:00.000Z') / 1000}`,
    );
    expect(text).toContain(
      `flink_gateway_token_valid_until_timestamp_seconds{provider="oauth2"} ${Date.parse('2026-11-29T21:00:00.000Z') / 1000}`,
    );
    expect(text).toContain('flink_gateway_submissions_total{source="uri",outcome="accepted"} 1');
    expect(Metrics.statusClass(404)).toBe('4xx');
  });
});
