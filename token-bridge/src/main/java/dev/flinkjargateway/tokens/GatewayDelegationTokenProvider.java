package dev.flinkjargateway.tokens;

import java.io.IOException;
import java.net.InetAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.IllegalConfigurationException;
import org.apache.flink.configuration.SecurityOptions;
import org.apache.flink.core.security.token.DelegationTokenProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Flink delegation-token provider {@code gateway}: pulls flink-jar-gateway's current token container
 * ({@code GET <url>/gateway/v1/tokens/bridge}, {@code Authorization: Bearer <secret>}) so that Flink's
 * own delegation-token manager distributes it to every TaskManager, where {@link
 * GatewayDelegationTokenReceiver} keeps it for {@link GatewayTokens}.
 *
 * <p>Flink 2.1 has no per-job re-obtain callback (FLINK-40019 is not released), so the provider asks
 * to be called again soon: {@code validUntil = min(earliest token expiry, now + poll-interval / ratio)}
 * — Flink renews at {@code ratio × (validUntil − now)}, so the next pull happens after about one poll
 * interval, or earlier when a token is about to expire.
 *
 * <p>It never throws from {@link #obtainDelegationTokens()} because the gateway is unreachable or
 * refuses: Flink 2.1 would then wait its fixed retry backoff (1 h by default) and, at MiniCluster
 * start, fail the cluster. Instead it keeps serving the last container it got (until that expires)
 * and tries again after one interval.
 */
public final class GatewayDelegationTokenProvider implements DelegationTokenProvider {

    public static final String SERVICE_NAME = "gateway";
    static final String BRIDGE_PATH = "/gateway/v1/tokens/bridge";
    /** Refuse absurd answers: a token container is a few kilobytes. */
    static final int MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
    /** Never schedule pulls closer than this, even for tokens that are (nearly) expired. */
    static final long MIN_DELAY_MS = 1_000;

    private static final Logger LOG = LoggerFactory.getLogger(GatewayDelegationTokenProvider.class);

    private URI configuredUrl;
    private Path urlFile;
    private Path secretFile;
    private long pollMs;
    private double ratio;
    private Duration timeout;
    private HttpClient http;
    private Clock clock = System::currentTimeMillis;

    /** The last container the gateway sent, and its earliest expiry (or null). */
    private volatile byte[] lastContainer;

    private volatile Long lastExpiry;
    private String lastProblem;

    /** Wall clock, replaceable in tests. */
    interface Clock {
        long millis();
    }

    void setClock(Clock clock) {
        this.clock = clock;
    }

    @Override
    public String serviceName() {
        return SERVICE_NAME;
    }

    @Override
    public void init(Configuration configuration) {
        String url = configuration.get(BridgeOptions.URL);
        this.configuredUrl = parseUrl(url, BridgeOptions.URL.key());
        this.urlFile = configuration.getOptional(BridgeOptions.URL_FILE).map(Path::of).orElse(null);
        this.secretFile =
                configuration.getOptional(BridgeOptions.SECRET_FILE).map(Path::of).orElse(null);
        this.pollMs = configuration.get(BridgeOptions.POLL_INTERVAL).toMillis();
        if (pollMs < 1) {
            throw new IllegalConfigurationException(
                    BridgeOptions.POLL_INTERVAL.key() + " must be at least 1 ms");
        }
        this.timeout = configuration.get(BridgeOptions.REQUEST_TIMEOUT);
        this.ratio = configuration.get(SecurityOptions.DELEGATION_TOKENS_RENEWAL_TIME_RATIO);
        if (!(ratio > 0 && ratio <= 1)) {
            ratio = 0.75;
        }
        this.http =
                HttpClient.newBuilder()
                        .connectTimeout(timeout)
                        .proxy(HttpClient.Builder.NO_PROXY)
                        .followRedirects(HttpClient.Redirect.NEVER)
                        .build();
        if (secretFile == null) {
            LOG.info(
                    "Gateway token bridge is not configured ({} unset); it stays inactive",
                    BridgeOptions.SECRET_FILE.key());
        } else {
            LOG.info(
                    "Gateway token bridge pulls tokens every {} ms from {}",
                    pollMs,
                    urlFile != null ? "the URL in " + urlFile : configuredUrl);
        }
    }

    @Override
    public boolean delegationTokensRequired() {
        return secretFile != null;
    }

    @Override
    public synchronized ObtainedDelegationTokens obtainDelegationTokens() {
        long now = clock.millis();
        try {
            pull();
            if (lastProblem != null) {
                LOG.info("Gateway token bridge: pulling tokens works again");
                lastProblem = null;
            }
        } catch (Exception e) {
            report(e);
        }
        Long expiry = lastExpiry;
        byte[] container = lastContainer;
        if (container != null && expiry != null && expiry <= now) {
            // Stale tokens are of no use to anyone; stop handing them out.
            lastContainer = null;
            lastExpiry = null;
            container = null;
            expiry = null;
        }
        byte[] bytes = container != null ? container : TokenContainerCodec.EMPTY_CONTAINER;
        return new ObtainedDelegationTokens(bytes, Optional.of(nextValidUntil(now, expiry)));
    }

    /**
     * The instant Flink's manager is told the tokens are valid until: the earliest real expiry, but
     * never later than one poll interval (divided by the renewal ratio, which Flink applies) and
     * never so close that Flink would renew in a tight loop.
     */
    long nextValidUntil(long now, Long earliestExpiry) {
        long byPoll = now + (long) Math.ceil(pollMs / ratio);
        long floor = now + (long) Math.ceil(MIN_DELAY_MS / ratio);
        long target = earliestExpiry == null ? byPoll : Math.min(earliestExpiry, byPoll);
        return Math.max(target, floor);
    }

    private void pull() throws IOException, InterruptedException {
        URI base = currentUrl();
        if (base == null) {
            throw new NoGatewayYet("no gateway URL yet (" + urlFile + " does not exist)");
        }
        String secret = readSecret();
        HttpRequest request =
                HttpRequest.newBuilder(bridgeUri(base))
                        .timeout(timeout)
                        .header("Authorization", "Bearer " + secret)
                        .header("Accept", "application/json")
                        .GET()
                        .build();
        HttpResponse<byte[]> response = http.send(request, HttpResponse.BodyHandlers.ofByteArray());
        if (response.statusCode() != 200) {
            // The body is the gateway's error envelope: it never carries a token, but keep it short.
            String body = new String(response.body(), StandardCharsets.UTF_8);
            throw new IOException(
                    "the gateway at "
                            + base
                            + " answered HTTP "
                            + response.statusCode()
                            + ": "
                            + (body.length() > 300 ? body.substring(0, 300) + "..." : body));
        }
        byte[] body = response.body();
        if (body.length > MAX_RESPONSE_BYTES) {
            throw new IOException("the gateway's answer exceeds " + MAX_RESPONSE_BYTES + " bytes");
        }
        // Validates the shape before anything is distributed; a broken answer keeps the last one.
        TokenContainerCodec.Checked checked = TokenContainerCodec.check(body);
        lastContainer = body;
        lastExpiry = checked.validUntil;
        LOG.debug(
                "Gateway token bridge pulled tokens of {} provider(s) from {}",
                checked.providers,
                base);
    }

    private URI currentUrl() throws IOException {
        if (urlFile == null) {
            return configuredUrl;
        }
        String text;
        try {
            text = Files.readString(urlFile, StandardCharsets.UTF_8).trim();
        } catch (NoSuchFileException e) {
            return null;
        }
        if (text.isEmpty()) {
            return null;
        }
        try {
            return parseUrl(text, urlFile.toString());
        } catch (IllegalConfigurationException e) {
            throw new IOException(e.getMessage());
        }
    }

    private String readSecret() throws IOException {
        String secret;
        try {
            secret = Files.readString(secretFile, StandardCharsets.UTF_8).trim();
        } catch (NoSuchFileException e) {
            throw new NoGatewayYet("the bridge secret file " + secretFile + " does not exist yet");
        }
        if (secret.isEmpty() || secret.chars().anyMatch(c -> c < 0x21 || c > 0x7e)) {
            throw new IOException("the bridge secret file " + secretFile + " is empty or malformed");
        }
        return secret;
    }

    static URI bridgeUri(URI base) {
        String text = base.toString();
        while (text.endsWith("/")) {
            text = text.substring(0, text.length() - 1);
        }
        return URI.create(text + BRIDGE_PATH);
    }

    /** An absolute http(s) URL without credentials; plain http only to a loopback host. */
    static URI parseUrl(String text, String where) {
        URI uri;
        try {
            uri = URI.create(text.trim());
        } catch (IllegalArgumentException e) {
            throw new IllegalConfigurationException(where + ": '" + text + "' is not a URL");
        }
        String scheme = uri.getScheme();
        if (uri.getHost() == null
                || !("http".equalsIgnoreCase(scheme) || "https".equalsIgnoreCase(scheme))) {
            throw new IllegalConfigurationException(
                    where + ": '" + text + "' is not an absolute http(s) URL");
        }
        if (uri.getUserInfo() != null) {
            throw new IllegalConfigurationException(where + ": the URL must not carry credentials");
        }
        if ("http".equalsIgnoreCase(scheme) && !isLoopback(uri.getHost())) {
            throw new IllegalConfigurationException(
                    where
                            + ": plain http is allowed only to a loopback host (the bridge secret would"
                            + " cross the network in clear), not "
                            + uri.getHost());
        }
        return uri;
    }

    static boolean isLoopback(String host) {
        String h = host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
        if (h.equalsIgnoreCase("localhost")) {
            return true;
        }
        if (!h.matches("[0-9.]+") && !h.contains(":")) {
            return false; // a name: do not resolve it here
        }
        try {
            return InetAddress.getByName(h).isLoopbackAddress();
        } catch (IOException e) {
            return false;
        }
    }

    /** Logs the first failure, and each change of it, at WARN; repeats at DEBUG. Never a token. */
    private void report(Exception e) {
        String problem = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        if (e instanceof InterruptedException) {
            Thread.currentThread().interrupt();
        }
        if (problem.equals(lastProblem)) {
            LOG.debug("Gateway token bridge: cannot pull tokens: {}", problem);
            return;
        }
        lastProblem = problem;
        if (e instanceof NoGatewayYet) {
            LOG.info(
                    "Gateway token bridge: {}; will try again in {} ms (keeping the last tokens)",
                    problem,
                    pollMs);
        } else {
            LOG.warn(
                    "Gateway token bridge: cannot pull tokens: {}; will try again in {} ms (keeping the"
                            + " last tokens until they expire)",
                    problem,
                    pollMs);
        }
    }

    /** Not an error worth a warning: the gateway has not started yet. */
    private static final class NoGatewayYet extends IOException {
        private static final long serialVersionUID = 1L;

        NoGatewayYet(String message) {
            super(message);
        }
    }
}
