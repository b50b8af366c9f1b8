package dev.flinkjargateway.tokens;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.security.token.DelegationTokenReceiver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flink delegation-token receiver {@code gateway}: runs on the JobManager and on every TaskManager
 * and hands each container the {@link GatewayDelegationTokenProvider} pulled to {@link
 * GatewayTokens}, the per-JVM registry job code reads.
 *
 * <p>It never throws: on a TaskManager, a receiver's exception fails the ResourceManager's whole
 * token push, and Flink 2.1 then waits {@code security.delegation.tokens.renewal.retry.backoff}
 * (1 h by default) before trying again. A container that cannot be decoded is logged (never its
 * content) and the previous tokens stay.
 */
public final class GatewayDelegationTokenReceiver implements DelegationTokenReceiver {

    private static final Logger LOG = LoggerFactory.getLogger(GatewayDelegationTokenReceiver.class);

    @Override
    public String serviceName() {
        return GatewayDelegationTokenProvider.SERVICE_NAME;
    }

    @Override
    public void init(Configuration configuration) {}

    @Override
    public void onNewTokensObtained(byte[] tokens) {
        GatewayTokens.Snapshot snapshot;
        try {
            snapshot = TokenContainerCodec.decode(tokens);
        } catch (Exception e) {
            LOG.warn("Gateway tokens not updated (keeping the previous ones): {}", e.getMessage());
            return;
        }
        GatewayTokens.update(snapshot);
        LOG.debug(
                "Gateway tokens updated: {} provider(s), {} job(s)",
                snapshot.payloads.size(),
                snapshot.jobs.size());
    }
}
