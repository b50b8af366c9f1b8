package dev.flinkjargateway.tokens;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Locale;
import java.util.Map;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The gateway's token container, as {@code GET /gateway/v1/tokens/bridge} returns it and as it
 * travels (unchanged) through Flink's delegation-token framework:
 *
 * <pre>{"version":1,"tokens":{"&lt;provider&gt;":"&lt;base64 payload&gt;"},"validUntil":&lt;epoch ms&gt;,
 *  "nextUpdateAt":&lt;epoch ms or null&gt;}</pre>
 *
 * <p>{@code nextUpdateAt} is when the gateway expects its tokens to change next (its next obtain
 * cycle; now while a cycle runs or a job waits for its first tokens), {@code null} when nothing is
 * scheduled. Gateways before it omit the field.
 *
 * <p>Per-job addressing convention (every built-in provider of the gateway follows it): a payload
 * that is a UTF-8 JSON object with a {@code jobs} object holds one entry per job id; its other
 * top-level fields (except {@code version}) are the provider's context (an S3 region, an Azure blob
 * endpoint). Payloads that do not follow it are kept whole, per provider.
 */
final class TokenContainerCodec {

    static final byte[] EMPTY_CONTAINER =
            "{\"version\":1,\"tokens\":{}}".getBytes(StandardCharsets.UTF_8);

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private TokenContainerCodec() {}

    /** What the provider needs to know about a container. */
    static final class Checked {
        final Long validUntil;
        final int providers;
        /** Whether the gateway said when its tokens change next (gateways that do add the field). */
        final boolean schedules;
        /** Epoch ms of the gateway's next token change; null when none is scheduled. */
        final Long nextUpdateAt;

        Checked(Long validUntil, int providers, boolean schedules, Long nextUpdateAt) {
            this.validUntil = validUntil;
            this.providers = providers;
            this.schedules = schedules;
            this.nextUpdateAt = nextUpdateAt;
        }
    }

    static Checked check(byte[] container) throws IOException {
        JsonNode root = parseContainer(container);
        JsonNode validUntil = root.get("validUntil");
        Long expiry =
                validUntil != null && validUntil.isIntegralNumber() && validUntil.asLong() > 0
                        ? validUntil.asLong()
                        : null;
        int providers = 0;
        for (Iterator<Map.Entry<String, JsonNode>> it = root.get("tokens").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isTextual()) {
                throw new IOException("the token container's entry '" + e.getKey() + "' is not base64 text");
            }
            Base64.getDecoder().decode(e.getValue().asText());
            providers++;
        }
        JsonNode next = root.get("nextUpdateAt");
        Long nextUpdateAt = next != null && next.isIntegralNumber() ? next.asLong() : null;
        return new Checked(expiry, providers, root.has("nextUpdateAt"), nextUpdateAt);
    }

    /** Decodes a container into the per-JVM snapshot {@link GatewayTokens} serves. */
    static GatewayTokens.Snapshot decode(byte[] container) throws IOException {
        JsonNode root = parseContainer(container);
        Map<String, byte[]> payloads = new HashMap<>();
        Map<String, Map<String, String>> entriesByJob = new HashMap<>();
        Map<String, String> contexts = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = root.get("tokens").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            String provider = e.getKey();
            byte[] payload;
            try {
                payload = Base64.getDecoder().decode(e.getValue().asText(""));
            } catch (IllegalArgumentException bad) {
                throw new IOException("the payload of provider '" + provider + "' is not base64");
            }
            payloads.put(provider, payload);
            JsonNode parsed = tryParse(payload);
            if (parsed == null || !parsed.isObject() || !parsed.path("jobs").isObject()) {
                continue; // not per job: available whole through GatewayTokens.payload(provider)
            }
            for (Iterator<Map.Entry<String, JsonNode>> jobs = parsed.get("jobs").fields(); jobs.hasNext(); ) {
                Map.Entry<String, JsonNode> job = jobs.next();
                entriesByJob
                        .computeIfAbsent(job.getKey().toLowerCase(Locale.ROOT), k -> new HashMap<>())
                        .put(provider, MAPPER.writeValueAsString(job.getValue()));
            }
            ObjectNode context = ((ObjectNode) parsed).deepCopy();
            context.remove("jobs");
            context.remove("version");
            if (context.size() > 0) {
                contexts.put(provider, MAPPER.writeValueAsString(context));
            }
        }
        Map<String, JobTokens> jobs = new HashMap<>();
        for (Map.Entry<String, Map<String, String>> e : entriesByJob.entrySet()) {
            jobs.put(e.getKey(), new JobTokens(e.getKey(), e.getValue(), contexts));
        }
        return new GatewayTokens.Snapshot(
                Collections.unmodifiableMap(payloads), Collections.unmodifiableMap(jobs), contexts);
    }

    private static JsonNode parseContainer(byte[] container) throws IOException {
        if (container == null || container.length == 0) {
            throw new IOException("empty token container");
        }
        JsonNode root;
        try {
            root = MAPPER.readTree(container);
        } catch (IOException e) {
            throw new IOException("the token container is not JSON");
        }
        if (root == null || !root.isObject() || root.path("version").asInt(-1) != 1) {
            throw new IOException("the token container is not version 1 ({\"version\":1,...})");
        }
        if (!root.path("tokens").isObject()) {
            throw new IOException("the token container has no 'tokens' object");
        }
        return root;
    }

    private static JsonNode tryParse(byte[] payload) {
        try {
            return MAPPER.readTree(payload);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }
}
