package dev.flinkjargateway.tokens;

import java.util.Collections;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * One job's delegation tokens, by provider: each value is that provider's entry for the job, as
 * JSON text (for example the {@code s3} entry {@code {"accessKeyId":...,"sessionToken":...,
 * "expiration":...}}). Immutable; {@code toString()} never shows a token.
 */
public final class JobTokens {

    private final String jobId;
    private final Map<String, String> entries;
    private final Map<String, String> contexts;

    JobTokens(String jobId, Map<String, String> entries, Map<String, String> contexts) {
        this.jobId = jobId;
        this.entries = Collections.unmodifiableMap(entries);
        this.contexts = contexts;
    }

    public String jobId() {
        return jobId;
    }

    /** The provider's entry for this job (JSON text), if it has one. */
    public Optional<String> get(String provider) {
        return Optional.ofNullable(entries.get(provider));
    }

    /**
     * The provider's context for every job (JSON text of its payload's other top-level fields), e.g.
     * {@code {"region":"eu-west-1"}} for {@code s3}, {@code {"accountName":...,"blobEndpoint":...}}
     * for {@code azure-blob}.
     */
    public Optional<String> context(String provider) {
        return Optional.ofNullable(contexts.get(provider));
    }

    /** The providers that have an entry for this job. */
    public Set<String> providers() {
        return entries.keySet();
    }

    public boolean isEmpty() {
        return entries.isEmpty();
    }

    @Override
    public String toString() {
        return "JobTokens{jobId=" + jobId + ", providers=" + entries.keySet() + "}";
    }
}
