package dev.flinkjargateway.tokens;

import java.time.Instant;
import java.util.Collections;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.flink.api.common.JobID;

/**
 * What job code reads: the delegation tokens flink-jar-gateway obtained for a job, as they reached
 * this JVM (a TaskManager, or the JobManager) through Flink's delegation-token framework.
 *
 * <pre>{@code
 * public void open(OpenContext ctx) {
 *     JobID jobId = getRuntimeContext().getJobInfo().getJobId();
 *     Optional<String> s3 = GatewayTokens.forJob(jobId).get("s3");
 *     // {"accessKeyId":"...","secretAccessKey":"...","sessionToken":"...","expiration":"..."}
 * }
 * }</pre>
 *
 * <p>Tokens are replaced as a whole on every delivery (about every poll interval of the {@code
 * gateway} provider), so read them when you need them instead of caching them for longer than
 * their expiry. A job registered at the gateway a moment ago may have to wait up to one interval.
 *
 * <p>The bridge jar must be on the cluster's class path ({@code lib/}) and <b>not</b> inside the job
 * jar: a job jar's own copy would be loaded child-first and see an empty registry (declare the
 * dependency {@code provided}).
 */
public final class GatewayTokens {

    /** An immutable view of one delivery. */
    static final class Snapshot {
        static final Snapshot EMPTY = new Snapshot(Map.of(), Map.of(), Map.of());

        final Map<String, byte[]> payloads;
        final Map<String, JobTokens> jobs;
        final Map<String, String> contexts;

        Snapshot(Map<String, byte[]> payloads, Map<String, JobTokens> jobs, Map<String, String> contexts) {
            this.payloads = payloads;
            this.jobs = jobs;
            this.contexts = contexts;
        }
    }

    private static volatile Snapshot current = Snapshot.EMPTY;
    private static volatile Instant updatedAt;
    private static volatile long updates;

    private GatewayTokens() {}

    /** The job's tokens as of the latest delivery (empty when the gateway has none for it). */
    public static JobTokens forJob(JobID jobId) {
        return forJob(jobId.toHexString());
    }

    /** The job's tokens as of the latest delivery; {@code jobId} is the 32-character hex id. */
    public static JobTokens forJob(String jobId) {
        JobTokens tokens = current.jobs.get(jobId.toLowerCase(Locale.ROOT));
        return tokens != null ? tokens : new JobTokens(jobId.toLowerCase(Locale.ROOT), Map.of(), current.contexts);
    }

    /**
     * A provider's whole payload (every job's entries), for payloads that are not addressed by job.
     * A copy; treat it as a secret.
     */
    public static Optional<byte[]> payload(String provider) {
        byte[] bytes = current.payloads.get(provider);
        return bytes == null ? Optional.empty() : Optional.of(bytes.clone());
    }

    /** The providers of the latest delivery. */
    public static Set<String> providers() {
        return Collections.unmodifiableSet(current.payloads.keySet());
    }

    /** When the latest delivery reached this JVM (empty before the first one). */
    public static Optional<Instant> updatedAt() {
        return Optional.ofNullable(updatedAt);
    }

    /** How many deliveries this JVM has received (to wait for the next one in tests). */
    public static long updates() {
        return updates;
    }

    /** Called by {@link GatewayDelegationTokenReceiver}; replaces everything at once. */
    static synchronized void update(Snapshot snapshot) {
        current = snapshot;
        updatedAt = Instant.now();
        updates++;
    }

    /** For tests. */
    static synchronized void clear() {
        current = Snapshot.EMPTY;
        updatedAt = null;
        updates = 0;
    }
}
