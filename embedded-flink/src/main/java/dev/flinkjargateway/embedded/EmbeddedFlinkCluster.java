package dev.flinkjargateway.embedded;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.FileInputStream;
import java.net.HttpURLConnection;
import java.security.KeyStore;
import javax.net.ssl.HttpsURLConnection;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import java.net.URI;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.flink.configuration.ClusterOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.SecurityOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.configuration.WebOptions;
import org.apache.flink.core.security.FlinkSecurityManager;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.util.FileUtils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a real Flink session cluster (a {@link MiniCluster}: one JobManager, one TaskManager, the
 * REST endpoint with the jar handlers of flink-runtime-web and the Web UI) inside this JVM.
 *
 * <p>Protocol for the parent process (see README.md): once the REST endpoint serves and the
 * TaskManager's slots are registered, exactly one line {@code FLINK_REST_URL=http://127.0.0.1:<port>}
 * is written to stdout. Everything else (logs, and whatever user jobs print) goes to stderr. The
 * process exits with 0 after closing the cluster when stdin reaches EOF, so it dies with its parent.
 */
public final class EmbeddedFlinkCluster {

    static final String LOOPBACK = "127.0.0.1";
    static final String URL_LINE_PREFIX = "FLINK_REST_URL=";

    /** The real stdout, reserved for the protocol line. */
    private static final PrintStream PROTOCOL_OUT;

    static {
        PROTOCOL_OUT =
                new PrintStream(
                        new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        // User jobs run in this JVM; a print() sink (like the bundled test WordCount's) would
        // otherwise corrupt the stdout protocol.
        System.setOut(System.err);
        // Must happen before the first Logger is created. An explicit -Dlog4j2.configurationFile wins.
        if (System.getProperty("log4j2.configurationFile") == null
                && System.getProperty("log4j.configurationFile") == null) {
            System.setProperty(
                    "log4j2.configurationFile", "classpath:embedded-flink-log4j2.properties");
        }
    }

    private static final Logger LOG = LoggerFactory.getLogger(EmbeddedFlinkCluster.class);

    private static final Duration STARTUP_TIMEOUT = Duration.ofSeconds(120);
    private static final Duration SHUTDOWN_TIMEOUT = Duration.ofSeconds(30);

    private final LauncherOptions options;
    private final CountDownLatch stopRequested = new CountDownLatch(1);
    private final Object lifecycleLock = new Object();
    private Path workDir;
    private MiniCluster cluster;
    private boolean stopped;

    private EmbeddedFlinkCluster(LauncherOptions options) {
        this.options = options;
    }

    public static void main(String[] args) {
        final LauncherOptions options;
        try {
            options = LauncherOptions.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("embedded-flink: " + e.getMessage());
            System.err.print(LauncherOptions.USAGE);
            System.exit(2);
            return;
        }
        System.exit(new EmbeddedFlinkCluster(options).run());
    }

    private int run() {
        Runtime.getRuntime()
                .addShutdownHook(new Thread(this::stop, "embedded-flink-shutdown-hook"));
        if (options.exitOnStdinEof) {
            // Started before the cluster so a parent that dies during startup still stops us.
            startStdinWatcher();
        }
        final String restUrl;
        try {
            restUrl = start();
        } catch (Throwable t) {
            System.err.println("embedded-flink: startup failed: " + t);
            t.printStackTrace(System.err);
            stop();
            return 1;
        }

        if (stopRequested.getCount() == 0) {
            // stdin hit EOF while starting: the parent is gone, nobody will read the URL.
            stop();
            return 0;
        }
        PROTOCOL_OUT.println(URL_LINE_PREFIX + restUrl);
        PROTOCOL_OUT.flush();
        LOG.info(
                "Flink {} session cluster ready at {} ({} slots, jars in {})",
                EnvironmentInformation.getVersion(),
                restUrl,
                options.slots,
                options.uploadDir.resolve("flink-web-upload"));

        int exitCode = 0;
        try {
            while (!stopRequested.await(1, TimeUnit.SECONDS)) {
                // The MiniCluster closes itself on fatal errors; a gateway must not keep
                // talking to a dead cluster, so leave with an error the parent can see.
                if (!cluster.isRunning() && !isStopped()) {
                    System.err.println("embedded-flink: the Flink cluster stopped unexpectedly");
                    exitCode = 1;
                    break;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        stop();
        return exitCode;
    }

    /** Starts the cluster and returns its REST base URL once it is actually serving. */
    private String start() throws Exception {
        ModuleAccessCheck.verify();
        Path uploadDir = options.uploadDir;
        Files.createDirectories(uploadDir);

        Configuration config = new Configuration();
        synchronized (lifecycleLock) {
            // Under java.io.tmpdir (not next to the upload dir) so nothing but jars ends up in
            // directories the parent owns; created owner-only (rwx------) by the JDK.
            workDir = Files.createTempDirectory("embedded-flink-");
        }
        applyDefaults(config, workDir);
        if (options.configFile.isPresent()) {
            List<String> keys = ConfigFileLoader.applyTo(options.configFile.get(), config);
            LOG.info("Applied {} keys from {}: {}", keys.size(), options.configFile.get(), keys);
        }
        applyForcedKeys(config, uploadDir, options.slots);
        installExitInterception(config);

        MiniClusterConfiguration clusterConfig =
                new MiniClusterConfiguration.Builder()
                        .setConfiguration(config)
                        .setNumTaskManagers(1)
                        .setNumSlotsPerTaskManager(options.slots)
                        .setCommonBindAddress(LOOPBACK)
                        .build();
        MiniCluster miniCluster = new MiniCluster(clusterConfig);
        synchronized (lifecycleLock) {
            if (stopped) {
                throw new IllegalStateException("shutdown requested during startup");
            }
            cluster = miniCluster;
        }
        miniCluster.start();

        URI restAddress =
                miniCluster.getRestAddress().get(STARTUP_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        // Printed from the bound port: the advertised host of the URI is whatever rest.address
        // resolved to, while the contract promises the literal 127.0.0.1.
        boolean ssl = SecurityOptions.isRestSSLEnabled(config);
        String restUrl = (ssl ? "https://" : "http://") + LOOPBACK + ":" + restAddress.getPort();
        awaitRestReady(restUrl, options.slots, ssl ? restClientSslContext(config) : null);
        return restUrl;
    }

    /** Small-footprint defaults; a --config file may override them. */
    private static void applyDefaults(Configuration config, Path workDir) throws IOException {
        Path ioTmp = Files.createDirectories(workDir.resolve("io"));
        Path webTmp = Files.createDirectories(workDir.resolve("web"));
        config.set(CoreOptions.TMP_DIRS, ioTmp.toString());
        config.set(WebOptions.TMP_DIR, webTmp.toString());
        // Network buffers are allocated eagerly as direct memory; 32m (1024 x 32k buffers) is
        // plenty for small test jobs. Managed memory is only allocated when a job needs it.
        config.set(TaskManagerOptions.NETWORK_MEMORY_MIN, MemorySize.parse("32m"));
        config.set(TaskManagerOptions.NETWORK_MEMORY_MAX, MemorySize.parse("32m"));
        config.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("64m"));
    }

    /**
     * A job's main() runs in this JVM (the JobManager's), and a MiniCluster, unlike Flink's
     * ClusterEntrypoint, installs no security manager: a submitted {@code System.exit} would stop
     * the whole cluster. Flink's own FlinkSecurityManager, with cluster.intercept-user-system-exit:
     * THROW (forced above), turns it into an exception of that job's run. It needs a Java that still
     * allows a security manager: 17 does; 18-23 with -Djava.security.manager=allow (the gateway
     * passes it); 24+ cannot, and then this logs a warning and the cluster runs without it.
     */
    private static void installExitInterception(Configuration config) {
        try {
            FlinkSecurityManager.setFromConfiguration(config);
            LOG.info("System.exit from user code is intercepted (cluster.intercept-user-system-exit: THROW)");
        } catch (UnsupportedOperationException | SecurityException e) {
            LOG.warn(
                    "This Java ({}) cannot install a security manager, so a job's System.exit stops the cluster: {}",
                    System.getProperty("java.version"),
                    e.toString());
        }
    }

    /** Keys the contract depends on; they win over the --config file. */
    private static void applyForcedKeys(Configuration config, Path uploadDir, int slots) {
        config.set(RestOptions.BIND_ADDRESS, LOOPBACK);
        config.set(RestOptions.ADDRESS, LOOPBACK);
        config.set(RestOptions.BIND_PORT, "0");
        config.set(RestOptions.PORT, 0);
        // The BLOB server would otherwise listen on the wildcard address.
        config.set(JobManagerOptions.BIND_HOST, LOOPBACK);
        config.set(JobManagerOptions.ADDRESS, LOOPBACK);
        config.set(TaskManagerOptions.BIND_HOST, LOOPBACK);
        config.set(TaskManagerOptions.HOST, LOOPBACK);
        config.set(TaskManagerOptions.NUM_TASK_SLOTS, slots);
        // On unless the --config file turns it off explicitly: the gateway needs the jar handlers,
        // but its tests show what a user's cluster with web.submit.enable: false answers.
        if (!config.contains(WebOptions.SUBMIT_ENABLE)) {
            config.set(WebOptions.SUBMIT_ENABLE, true);
        }
        config.set(WebOptions.UPLOAD_DIR, uploadDir.toString());
        config.set(ClusterOptions.INTERCEPT_USER_SYSTEM_EXIT, ClusterOptions.UserSystemExitMode.THROW);
    }

    /**
     * Waits until GET /v1/overview answers 200 and reports the TaskManager's slots, so the parent
     * can submit jobs right after reading the URL line.
     */
    private static void awaitRestReady(String restUrl, int slots, SSLContext ssl) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        long deadline = System.nanoTime() + STARTUP_TIMEOUT.toNanos();
        String lastProblem = "no response";
        while (System.nanoTime() < deadline) {
            try {
                HttpURLConnection conn =
                        (HttpURLConnection) new URL(restUrl + "/v1/overview").openConnection();
                if (ssl != null && conn instanceof HttpsURLConnection https) {
                    https.setSSLSocketFactory(ssl.getSocketFactory());
                    // Our own endpoint on the loopback address: the truststore is the check.
                    https.setHostnameVerifier((host, session) -> LOOPBACK.equals(host));
                }
                conn.setConnectTimeout(2000);
                conn.setReadTimeout(5000);
                int status = conn.getResponseCode();
                if (status == 200) {
                    try (InputStream in = conn.getInputStream()) {
                        JsonNode overview = mapper.readTree(in);
                        if (overview.path("taskmanagers").asInt() >= 1
                                && overview.path("slots-total").asInt() >= slots) {
                            return;
                        }
                        lastProblem = "overview " + overview;
                    }
                } else {
                    lastProblem = "HTTP " + status;
                }
                conn.disconnect();
            } catch (IOException e) {
                lastProblem = e.toString();
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException(
                "REST endpoint " + restUrl + " not ready after " + STARTUP_TIMEOUT + ": "
                        + lastProblem);
    }

    /**
     * With security.ssl.rest.enabled, the readiness probe is a REST client like any other: it
     * trusts security.ssl.rest.truststore and, when the endpoint requires client certificates
     * (security.ssl.rest.authentication-enabled), presents security.ssl.rest.keystore.
     */
    private static SSLContext restClientSslContext(Configuration config) throws Exception {
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(loadStore(config.get(SecurityOptions.SSL_REST_TRUSTSTORE), config.get(SecurityOptions.SSL_REST_TRUSTSTORE_TYPE),
                config.get(SecurityOptions.SSL_REST_TRUSTSTORE_PASSWORD)));
        KeyManagerFactory kmf = null;
        if (SecurityOptions.isRestSSLAuthenticationEnabled(config)) {
            kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(loadStore(config.get(SecurityOptions.SSL_REST_KEYSTORE), config.get(SecurityOptions.SSL_REST_KEYSTORE_TYPE),
                    config.get(SecurityOptions.SSL_REST_KEYSTORE_PASSWORD)),
                    config.get(SecurityOptions.SSL_REST_KEY_PASSWORD).toCharArray());
        }
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        return context;
    }

    private static KeyStore loadStore(String path, String type, String password) throws Exception {
        if (path == null || password == null) {
            throw new IllegalArgumentException("security.ssl.rest.enabled is true but a keystore/truststore path or password is missing");
        }
        KeyStore store = KeyStore.getInstance(type);
        try (FileInputStream in = new FileInputStream(path)) {
            store.load(in, password.toCharArray());
        }
        return store;
    }

    /** Stdin EOF means the parent is gone (or wants us gone): request a clean stop. */
    private void startStdinWatcher() {
        Thread watcher =
                new Thread(
                        () -> {
                            byte[] buffer = new byte[256];
                            try {
                                while (System.in.read(buffer) != -1) {
                                    // input is ignored; only EOF matters
                                }
                            } catch (IOException e) {
                                // a broken stdin is treated like EOF
                            }
                            LOG.info("stdin closed, shutting down");
                            stopRequested.countDown();
                        },
                        "embedded-flink-stdin-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    private boolean isStopped() {
        synchronized (lifecycleLock) {
            return stopped;
        }
    }

    /**
     * Idempotent; called from the main thread and from the shutdown hook (SIGTERM/SIGINT), so it
     * must be safe to call twice and must not call System.exit.
     */
    private void stop() {
        synchronized (lifecycleLock) {
            if (stopped) {
                return;
            }
            stopped = true;
            if (cluster != null) {
                try {
                    cluster.closeAsync().get(SHUTDOWN_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
                } catch (Exception e) {
                    System.err.println("embedded-flink: error while closing the cluster: " + e);
                }
            }
            if (workDir != null) {
                try {
                    FileUtils.deleteDirectory(workDir.toFile());
                } catch (IOException e) {
                    System.err.println("embedded-flink: could not delete " + workDir + ": " + e);
                }
            }
        }
    }
}
