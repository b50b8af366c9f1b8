package dev.flinkjargateway.tokens;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.core.security.token.DelegationTokenProvider.ObtainedDelegationTokens;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GatewayDelegationTokenProviderTest {

    private static final long NOW = 1_700_000_000_000L;

    @TempDir Path dir;
    private HttpServer server;
    private final AtomicReference<String> body = new AtomicReference<>();
    private final AtomicReference<Integer> status = new AtomicReference<>(200);
    private final List<String> authorizations = new ArrayList<>();

    @BeforeEach
    void startGateway() throws Exception {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext(
                "/gateway/v1/tokens/bridge",
                exchange -> {
                    authorizations.add(exchange.getRequestHeaders().getFirst("Authorization"));
                    byte[] bytes = body.get().getBytes(StandardCharsets.UTF_8);
                    exchange.sendResponseHeaders(status.get(), bytes.length);
                    exchange.getResponseBody().write(bytes);
                    exchange.close();
                });
        server.start();
        Files.writeString(dir.resolve("secret"), "s3cr3t-value\n");
    }

    @AfterEach
    void stopGateway() {
        server.stop(0);
    }

    private String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    private GatewayDelegationTokenProvider provider(Configuration conf) {
        GatewayDelegationTokenProvider p = new GatewayDelegationTokenProvider();
        p.init(conf);
        p.setClock(() -> NOW);
        return p;
    }

    private Configuration conf() {
        Configuration conf = new Configuration();
        conf.set(BridgeOptions.URL, url());
        conf.set(BridgeOptions.SECRET_FILE, dir.resolve("secret").toString());
        conf.setString(BridgeOptions.POLL_INTERVAL.key(), "3 s");
        return conf;
    }

    private static String container(String payload, Long validUntil) {
        String b64 = Base64.getEncoder().encodeToString(payload.getBytes(StandardCharsets.UTF_8));
        return "{\"version\":1,\"tokens\":{\"oauth2\":\"" + b64 + "\"}"
                + (validUntil == null ? "" : ",\"validUntil\":" + validUntil)
                + "}";
    }

    @Test
    void pullsTheContainerWithTheSecretAndAsksToBeCalledAgainWithinOneInterval() throws Exception {
        body.set(container("{\"version\":1,\"jobs\":{\"ab\":{\"accessToken\":\"T\"}}}", NOW + 3_600_000));
        ObtainedDelegationTokens t = provider(conf()).obtainDelegationTokens();
        assertEquals(List.of("Bearer s3cr3t-value"), authorizations);
        assertArrayEquals(body.get().getBytes(StandardCharsets.UTF_8), t.getTokens());
        // Flink renews at 0.75 × (validUntil − now): 4000 ms × 0.75 = the 3 s interval.
        assertEquals(NOW + 4_000, t.getValidUntil().orElseThrow());
    }

    @Test
    void anEarlierTokenExpiryWinsOverThePollInterval() throws Exception {
        body.set(container("{}", NOW + 2_000));
        assertEquals(NOW + 2_000, provider(conf()).obtainDelegationTokens().getValidUntil().orElseThrow());
        body.set(container("{}", NOW + 10));
        // Never so close that Flink would renew in a tight loop.
        long floor = NOW + (long) Math.ceil(GatewayDelegationTokenProvider.MIN_DELAY_MS / 0.75);
        assertEquals(floor, provider(conf()).obtainDelegationTokens().getValidUntil().orElseThrow());
    }

    @Test
    void keepsTheLastContainerWhenTheGatewayFailsAndNeverThrows() throws Exception {
        GatewayDelegationTokenProvider p = provider(conf());
        body.set(container("{\"jobs\":{}}", NOW + 3_600_000));
        byte[] first = p.obtainDelegationTokens().getTokens();
        status.set(401);
        body.set("{\"errors\":[\"GW_TOKENS_BRIDGE_UNAUTHORIZED: no\"]}");
        ObtainedDelegationTokens t = p.obtainDelegationTokens();
        assertArrayEquals(first, t.getTokens());
        assertEquals(NOW + 4_000, t.getValidUntil().orElseThrow());
        server.stop(0);
        assertArrayEquals(first, p.obtainDelegationTokens().getTokens());
    }

    @Test
    void servesAnEmptyContainerBeforeTheGatewayExistsAndDropsExpiredTokens() throws Exception {
        Configuration conf = conf();
        conf.set(BridgeOptions.URL_FILE, dir.resolve("url").toString());
        GatewayDelegationTokenProvider p = provider(conf);
        ObtainedDelegationTokens t = p.obtainDelegationTokens();
        assertArrayEquals(TokenContainerCodec.EMPTY_CONTAINER, t.getTokens());
        assertTrue(authorizations.isEmpty());

        Files.writeString(dir.resolve("url"), url() + "\n");
        body.set(container("{}", NOW + 2_000));
        assertFalse(new String(p.obtainDelegationTokens().getTokens(), StandardCharsets.UTF_8).contains("\"tokens\":{}"));
        assertEquals(1, authorizations.size());

        status.set(503);
        p.setClock(() -> NOW + 5_000); // the tokens expired meanwhile
        assertArrayEquals(TokenContainerCodec.EMPTY_CONTAINER, p.obtainDelegationTokens().getTokens());
    }

    @Test
    void isInactiveWithoutASecretFileAndRefusesPlainHttpToOtherHosts() {
        GatewayDelegationTokenProvider p = new GatewayDelegationTokenProvider();
        p.init(new Configuration());
        assertFalse(p.delegationTokensRequired());

        Configuration remote = conf();
        remote.set(BridgeOptions.URL, "http://10.1.2.3:8081");
        assertThrows(IllegalConfigurationException.class, () -> new GatewayDelegationTokenProvider().init(remote));
        remote.set(BridgeOptions.URL, "https://gateway.example:8443/");
        new GatewayDelegationTokenProvider().init(remote);
        assertEquals(
                "https://gateway.example:8443/gateway/v1/tokens/bridge",
                GatewayDelegationTokenProvider.bridgeUri(java.net.URI.create("https://gateway.example:8443/")).toString());
    }

    @Test
    void followsTheGatewaysNextUpdateAtBetweenThePollAndTheIdleInterval() throws Exception {
        GatewayDelegationTokenProvider p = provider(conf()); // poll 3 s, idle 1 min
        // Nothing scheduled at the gateway: one idle interval (Flink renews at 0.75 × (validUntil − now)).
        body.set("{\"version\":1,\"tokens\":{},\"nextUpdateAt\":null}");
        assertEquals(NOW + 80_000, p.obtainDelegationTokens().getValidUntil().orElseThrow());
        // The gateway's next change in 20 s: just after it.
        body.set("{\"version\":1,\"tokens\":{},\"nextUpdateAt\":" + (NOW + 20_000) + "}");
        assertEquals(NOW + 28_000, p.obtainDelegationTokens().getValidUntil().orElseThrow());
        // Something to deliver now (a cycle running, a job waiting): one poll interval.
        body.set("{\"version\":1,\"tokens\":{},\"nextUpdateAt\":" + NOW + "}");
        assertEquals(NOW + 4_000, p.obtainDelegationTokens().getValidUntil().orElseThrow());
        // The gateway cannot be reached: one poll interval.
        status.set(503);
        body.set("{\"version\":1,\"tokens\":{},\"nextUpdateAt\":null}");
        assertEquals(NOW + 4_000, p.obtainDelegationTokens().getValidUntil().orElseThrow());
    }

    @Test
    void findsTheOtherProvidersAProviderCanSee() throws Exception {
        Path plugins = dir.resolve("plugins");
        Files.createDirectories(plugins.resolve("s3-fs-hadoop"));
        try (java.util.jar.JarOutputStream jar =
                new java.util.jar.JarOutputStream(
                        Files.newOutputStream(plugins.resolve("s3-fs-hadoop").resolve("s3.jar")))) {
            jar.putNextEntry(
                    new java.util.zip.ZipEntry(
                            "META-INF/services/org.apache.flink.core.security.token.DelegationTokenProvider"));
            jar.write("# comment\norg.example.S3TokenProvider\n".getBytes(StandardCharsets.UTF_8));
        }
        Configuration conf = conf();
        conf.setString("security.delegation.token.provider.hive.some-setting", "x");
        conf.setString("security.delegation.token.provider.off.enabled", "false");
        java.util.TreeMap<String, String> found =
                CoProviders.find(conf, getClass().getClassLoader(), plugins);
        // The gateway itself and disabled providers are left out; the test class path has the
        // counting provider and Flink's own hadoopfs/hbase.
        assertEquals(
                java.util.Set.of("counting", "hadoopfs", "hbase", "hive", "org.example.S3TokenProvider"),
                found.keySet());
        assertTrue(found.get("hive").contains("security.delegation.token.provider.hive.some-setting"));
        assertFalse(CoProviders.kerberosConfigured(conf));
    }
}
