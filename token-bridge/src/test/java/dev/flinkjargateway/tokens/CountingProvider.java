package dev.flinkjargateway.tokens;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.security.token.DelegationTokenProvider;
import org.apache.flink.core.security.token.DelegationTokenReceiver;

/**
 * A second delegation-token provider beside the bridge, as a Kerberos/HDFS or S3 provider would
 * be: it counts how often Flink's manager makes it obtain, and can be told to fail. Loaded by the
 * service loader wherever Flink's manager runs in these tests; {@code
 * security.delegation.token.provider.counting.enabled: false} leaves it out. Its receiver has the
 * same service name, or Flink's manager refuses to start.
 */
public final class CountingProvider implements DelegationTokenProvider {

    static final AtomicInteger OBTAINS = new AtomicInteger();
    static final AtomicInteger FAILURES_TO_COME = new AtomicInteger();
    /** The renewal time this provider's own tokens have (ms from now); a Kerberos TGT-like 1 h. */
    static volatile long ownValidityMs = 3_600_000;

    @Override
    public String serviceName() {
        return "counting";
    }

    @Override
    public void init(Configuration configuration) {}

    @Override
    public boolean delegationTokensRequired() {
        return true;
    }

    @Override
    public ObtainedDelegationTokens obtainDelegationTokens() {
        OBTAINS.incrementAndGet();
        if (FAILURES_TO_COME.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            throw new IllegalStateException("the counting provider's service is down");
        }
        return new ObtainedDelegationTokens(
                "counted".getBytes(StandardCharsets.UTF_8),
                Optional.of(System.currentTimeMillis() + ownValidityMs));
    }

    /** Its receiver (same service name). */
    public static final class Receiver implements DelegationTokenReceiver {
        @Override
        public String serviceName() {
            return "counting";
        }

        @Override
        public void init(Configuration configuration) {}

        @Override
        public void onNewTokensObtained(byte[] tokens) {}
    }
}
