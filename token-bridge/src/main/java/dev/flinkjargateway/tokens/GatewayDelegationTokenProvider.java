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
 * <p>Flink 1.20–2.3 have no per-job re-obtain callback (FLINK-40019 is not released), and their
 * manager runs every enabled provider in one cycle scheduled by the earliest renewal any provider
 * reports: whatever the bridge reports also re-obtains every other provider's tokens. So the bridge
 * reports a short time (one poll interval) only while the gateway has something to deliver soon —
 * its answer's {@code nextUpdateAt}: a cycle in flight, a job waiting for its first tokens, a
 * renewal due — and otherwise the gateway's next token change, at most one idle interval away.
 * Flink renews at {@code ratio × (validUntil − now)}, so the provider reports {@code validUntil =
 * now + (wanted delay) / ratio}.
 *
 * <p>At start it lists the other delegation-token providers the JobManager loads (what a provider
 * can see of them: the same service loader, the plugins directory's service files and the
 * configuration's per-provider keys) and warns when any may obtain tokens, because they share the
 * bridge's cycles and a failure of any of them fails the whole cycle for {@code
 * security.delegation.tokens.renewal.retry.backoff} (1 h by default).
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
    private long idleMs;
    private double ratio;
    private Duration timeout;
    private HttpClient http;
    private Clock clock = System::currentTimeMillis;

    /** The last container the gateway sent, and its earliest expiry (or null). */
    private volatile byte[] lastContainer;

    private volatile Long lastExpiry;
    /** Whether the last pull succeeded and its answer said when the gateway's tokens change next. */
    private boolean lastScheduled;

    private Long lastNextUpdateAt;
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
        this.idleMs = Math.max(pollMs, configuration.get(BridgeOptions.IDLE_INTERVAL).toMillis());
        this.timeout = configuration.get(BridgeOptions.REQUEST_TIMEOUT);
        // Flink multiplies by this ratio whatever its value; divide by the same one.
        this.ratio = configuration.get(SecurityOptions.DELEGATION_TOKENS_RENEWAL_TIME_RATIO);
        if (!(ratio > 0) || Double.isInfinite(ratio)) {
            LOG.warn(
                    "{} is {}: Flink's token manager renews all tokens back to back with it",
                    SecurityOptions.DELEGATION_TOKENS_RENEWAL_TIME_RATIO.key(),
                    ratio);
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
                    "Gateway token bridge pulls tokens from {}: every {} ms while the gateway has"
                            + " something to deliver soon, at least every {} ms otherwise",
                    urlFile != null ? "the URL in " + urlFile : configuredUrl,
                    pollMs,
                    idleMs);
            CoProviders.warnAbout(configuration, getClass().getClassLoader(), pollMs, idleMs);
        }
    }

    @Override
    public boolean delegationTokensRequired() {
        return secretFile != null;
    }

    @Override
    public synchronized ObtainedDelegationTokens obtainDelegationTokens() {
        lastScheduled = false;
        try {
            pull();
            if (lastProblem != null) {
                LOG.info("Gateway token bridge: pulling tokens works again");
                lastProblem = null;
            }
        } catch (Exception e) {
            report(e);
        }
        // After the pull: Flink measures the renewal delay from (about) when this call returns.
        long now = clock.millis();
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
        long next = nextPullAt(now, expiry, lastScheduled, lastNextUpdateAt);
        return new ObtainedDelegationTokens(bytes, Optional.of(validUntilFor(now, next)));
    }

    /**
     * When the bridge wants Flink's manager to call it again. Without word from the gateway (it
     * cannot be reached, or is older than the {@code nextUpdateAt} field): one poll interval.
     * Otherwise just after the gateway's next token change, but not sooner than one poll interval
     * and not later than one idle interval (a job registered meanwhile waits that long); never
     * after the tokens' own renewal point.
     */
    long nextPullAt(long now, Long earliestExpiry, boolean scheduled, Long nextUpdateAt) {
        long target;
        if (!scheduled) {
            target = now + pollMs;
        } else {
            target = now + idleMs;
            if (nextUpdateAt != null) {
                target = Math.min(target, Math.max(nextUpdateAt + MIN_DELAY_MS, now + pollMs));
            }
        }
        if (earliestExpiry != null) {
            // As Flink would renew the tokens themselves: at the ratio of their remaining validity.
            target = Math.min(target, now + Math.round(ratio * (earliestExpiry - now)));
        }
        return target;
    }

    /**
     * The instant Flink's manager is told the tokens are valid until, so that it renews at {@code
     * pullAt}: Flink waits {@code ratio × (validUntil − now)}. Never so close that Flink would renew
     * in a tight loop.
     */
    long validUntilFor(long now, long pullAt) {
        long wanted = Math.max(pullAt - now, MIN_DELAY_MS);
        return now + (long) Math.ceil(wanted / ratio);
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
        lastScheduled = checked.schedules;
        lastNextUpdateAt = checked.nextUpdateAt;
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
