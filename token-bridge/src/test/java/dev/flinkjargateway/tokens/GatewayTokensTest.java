package dev.flinkjargateway.tokens;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Set;
import org.apache.flink.api.common.JobID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class GatewayTokensTest {

    private static final String JOB = "0123456789abcdef0123456789abcdef";

    @AfterEach
    void clear() {
        GatewayTokens.clear();
    }

    private static String b64(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    private static byte[] container(String... providerPayloads) {
        StringBuilder sb = new StringBuilder("{\"version\":1,\"tokens\":{");
        for (int i = 0; i < providerPayloads.length; i += 2) {
            if (i > 0) sb.append(',');
            sb.append('"').append(providerPayloads[i]).append("\":\"").append(b64(providerPayloads[i + 1])).append('"');
        }
        return sb.append("}}").toString().getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void theReceiverMakesEachProvidersEntryAvailableByJobId() throws Exception {
        new GatewayDelegationTokenReceiver()
                .onNewTokensObtained(
                        container(
                                "s3", "{\"version\":1,\"region\":\"eu-west-1\",\"jobs\":{\"" + JOB + "\":{\"sessionToken\":\"S\"}}}",
                                "oauth2", "{\"version\":1,\"jobs\":{\"" + JOB.toUpperCase() + "\":{\"accessToken\":\"A\"},\"ffffffffffffffffffffffffffffffff\":{\"accessToken\":\"B\"}}}",
                                "opaque", "not json"));
        JobTokens tokens = GatewayTokens.forJob(JobID.fromHexString(JOB));
        assertEquals(Set.of("s3", "oauth2"), tokens.providers());
        assertEquals("{\"sessionToken\":\"S\"}", tokens.get("s3").orElseThrow());
        assertEquals("{\"accessToken\":\"A\"}", tokens.get("oauth2").orElseThrow());
        assertEquals("{\"region\":\"eu-west-1\"}", tokens.context("s3").orElseThrow());
        assertFalse(tokens.toString().contains("\"S\""));
        assertEquals("not json", new String(GatewayTokens.payload("opaque").orElseThrow(), StandardCharsets.UTF_8));
        assertEquals(1, GatewayTokens.updates());
        assertTrue(GatewayTokens.forJob("00000000000000000000000000000000").isEmpty());
    }

    @Test
    void aBrokenContainerIsLoggedAndThePreviousTokensStay() throws Exception {
        GatewayDelegationTokenReceiver r = new GatewayDelegationTokenReceiver();
        r.onNewTokensObtained(container("s3", "{\"jobs\":{\"" + JOB + "\":{\"k\":1}}}"));
        // Never throws: on a TaskManager that would fail the ResourceManager's whole push.
        r.onNewTokensObtained("{\"version\":2}".getBytes(StandardCharsets.UTF_8));
        r.onNewTokensObtained(new byte[0]);
        r.onNewTokensObtained("{\"version\":1,\"tokens\":{\"s3\":\"%%%\"}}".getBytes(StandardCharsets.UTF_8));
        assertEquals(1, GatewayTokens.updates());
        assertEquals("{\"k\":1}", GatewayTokens.forJob(JOB).get("s3").orElseThrow());
        // A later delivery without the job removes it.
        r.onNewTokensObtained(container("s3", "{\"jobs\":{}}"));
        assertTrue(GatewayTokens.forJob(JOB).isEmpty());
    }
}
