package dev.flinkjargateway.compat;

import org.apache.flink.api.common.JobID;
import org.apache.flink.client.program.rest.RestClusterClient;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.SecurityOptions;
import org.apache.flink.runtime.highavailability.nonha.standalone.StandaloneClientHAServices;
import org.apache.flink.runtime.messages.webmonitor.JobDetails;
import org.apache.flink.runtime.messages.webmonitor.MultipleJobsDetails;
import org.apache.flink.runtime.rest.FileUpload;
import org.apache.flink.runtime.rest.RestClient;
import org.apache.flink.runtime.rest.messages.EmptyMessageParameters;
import org.apache.flink.runtime.rest.messages.EmptyRequestBody;
import org.apache.flink.runtime.rest.messages.JobsOverviewHeaders;
import org.apache.flink.runtime.rest.util.RestClientException;
import org.apache.flink.runtime.rest.util.RestConstants;
import org.apache.flink.runtime.rest.util.RestMapperUtils;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.runtime.webmonitor.handlers.JarDeleteHeaders;
import org.apache.flink.runtime.webmonitor.handlers.JarDeleteMessageParameters;
import org.apache.flink.runtime.webmonitor.handlers.JarRunHeaders;
import org.apache.flink.runtime.webmonitor.handlers.JarRunMessageParameters;
import org.apache.flink.runtime.webmonitor.handlers.JarRunRequestBody;
import org.apache.flink.runtime.webmonitor.handlers.JarRunResponseBody;
import org.apache.flink.runtime.webmonitor.handlers.JarUploadHeaders;
import org.apache.flink.runtime.webmonitor.handlers.JarUploadResponseBody;
import org.apache.flink.util.ExceptionUtils;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.PrintStream;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeoutException;

/**
 * Replays the Flink Kubernetes Operator's FlinkSessionJob submission against a Flink REST endpoint
 * (a real JobManager or the gateway), using Flink's own client classes, and prints one JSON object
 * describing what each step returned.
 *
 * <p>Mirrors {@code AbstractFlinkService.uploadJar/runJar/deleteJar}: the upload goes through a
 * plain {@link RestClient} (no retries); run, delete and the job overview go through a fresh
 * {@link RestClusterClient} per call (retrying on I/O errors and 503), as the operator does.
 */
public final class OperatorSequence {

    private static final Logger LOG = LoggerFactory.getLogger(OperatorSequence.class);

    /** Upper bound for the whole sequence, so a stuck server can never hang the caller. */
    private static final Duration OVERALL_BUDGET = Duration.ofMinutes(4);

    private final Options options;
    private final Map<String, String> flinkConfiguration;
    private final Configuration clientConfiguration;
    private final ExecutorService executor;
    private final Instant deadline;

    private OperatorSequence(Options options, ExecutorService executor) {
        this.options = options;
        this.executor = executor;
        this.deadline = Instant.now().plus(OVERALL_BUDGET);

        Map<String, String> conf = OperatorConfiguration.sessionJobConfig(options.port());
        conf.putAll(options.extraConf());
        this.flinkConfiguration = conf;

        // Like the operator, the client is configured from the same session-job config it sends,
        // with REST SSL on switched to the operator pod's own keystore and truststore; only the
        // idle timeout is tightened so a silent server fails a call instead of hanging it.
        Map<String, String> client = new HashMap<>(conf);
        client.put(RestOptions.IDLENESS_TIMEOUT.key(), options.callTimeout().toMillis() + " ms");
        this.clientConfiguration =
                OperatorRestConfig.apply(Configuration.fromMap(client), System.getenv());
    }

    public static void main(String[] args) {
        // Stdout carries exactly one JSON object; anything Flink might print goes to stderr.
        PrintStream stdout = System.out;
        System.setOut(System.err);

        Options options;
        try {
            options = Options.parse(args);
        } catch (Options.UsageException e) {
            System.err.println(e.getMessage());
            System.err.println(Options.USAGE);
            System.exit(2);
            return;
        }

        startWatchdog(OVERALL_BUDGET.plusSeconds(30));
        ExecutorService executor = Executors.newCachedThreadPool(daemonThreads());
        try {
            Map<String, Object> result = new OperatorSequence(options, executor).run();
            stdout.println(RestMapperUtils.getStrictObjectMapper().writeValueAsString(result));
            stdout.flush();
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        // Netty event loops of closed clients may linger; do not wait for them.
        System.exit(0);
    }

    private Map<String, Object> run() {
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("flinkClientVersion", EnvironmentInformation.getVersion());
        result.put("jobId", options.jobId().toHexString());
        result.put("restSsl", SecurityOptions.isRestSSLEnabled(clientConfiguration));
        result.put(
                "restSslClientKeystore",
                SecurityOptions.isRestSSLAuthenticationEnabled(clientConfiguration)
                        ? clientConfiguration.get(SecurityOptions.SSL_REST_KEYSTORE)
                        : null);

        Map<String, Object> upload = attempt("upload", this::upload);
        result.put("upload", upload);
        String jarId = (String) upload.get("jarId");

        // The operator builds the body once; a retried POST re-sends the identical request.
        JarRunRequestBody runBody =
                RunRequests.operatorRunBody(
                        options.entryClass(), 1, options.jobId(), flinkConfiguration);
        result.put("runBodyFields", jsonFieldNames(runBody));
        result.put("flinkConfigurationEntries", flinkConfiguration.size());

        if (jarId != null) {
            result.put("run1", attempt("run1", timeout -> runJar(timeout, jarId, runBody)));
            result.put("run2", attempt("run2", timeout -> runJar(timeout, jarId, runBody)));
        } else {
            result.put("run1", skipped());
            result.put("run2", skipped());
        }
        result.put("overview", attempt("overview", this::jobsOverview));
        if (jarId != null) {
            result.put("delete1", attempt("delete1", timeout -> deleteJar(timeout, jarId)));
            result.put("delete2", attempt("delete2", timeout -> deleteJar(timeout, jarId)));
        } else {
            result.put("delete1", skipped());
            result.put("delete2", skipped());
        }
        return result;
    }

    // ---- the operator's calls -------------------------------------------------------------

    /** {@code AbstractFlinkService.uploadJar}: multipart with attribute "request" and "file_0". */
    private Map<String, Object> upload(Duration timeout) throws Exception {
        try (RestClient restClient = new RestClient(clientConfiguration, executor)) {
            JarUploadResponseBody response =
                    restClient
                            .sendRequest(
                                    options.host(),
                                    options.port(),
                                    JarUploadHeaders.getInstance(),
                                    EmptyMessageParameters.getInstance(),
                                    EmptyRequestBody.getInstance(),
                                    List.of(
                                            new FileUpload(
                                                    options.jar(),
                                                    RestConstants.CONTENT_TYPE_JAR)))
                            .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            String filename = response.getFilename();
            // Exactly the operator's derivation: last '/'-separated segment of the server path.
            String jarId = filename.substring(filename.lastIndexOf('/') + 1);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("filename", filename);
            out.put("jarId", jarId);
            out.put("status", String.valueOf(response.getStatus()));
            return out;
        }
    }

    /** {@code AbstractFlinkService.runJar}; the returned jobid is recorded, not trusted. */
    private Map<String, Object> runJar(Duration timeout, String jarId, JarRunRequestBody body)
            throws Exception {
        try (RestClusterClient<String> client = clusterClient()) {
            JarRunHeaders headers = JarRunHeaders.getInstance();
            JarRunMessageParameters parameters = headers.getUnresolvedMessageParameters();
            parameters.jarIdPathParameter.resolve(jarId);
            JarRunResponseBody response =
                    client.sendRequest(headers, parameters, body)
                            .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("jobid", response.getJobId().toHexString());
            return out;
        }
    }

    /** {@code AbstractFlinkService.getJobStatus}: GET /v1/jobs/overview and look for our id. */
    private Map<String, Object> jobsOverview(Duration timeout) throws Exception {
        try (RestClusterClient<String> client = clusterClient()) {
            MultipleJobsDetails details =
                    client.sendRequest(
                                    JobsOverviewHeaders.getInstance(),
                                    EmptyMessageParameters.getInstance(),
                                    EmptyRequestBody.getInstance())
                            .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            JobID ours = options.jobId();
            Optional<JobDetails> job =
                    details.getJobs() == null
                            ? Optional.empty()
                            : details.getJobs().stream()
                                    .filter(j -> ours.equals(j.getJobId()))
                                    .findFirst();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("listed", job.isPresent());
            out.put("state", job.map(j -> j.getStatus().name()).orElse(null));
            // JobDetails' @JsonCreator unboxes tasks.total; reaching here proves it parsed.
            out.put("tasksTotal", job.map(JobDetails::getNumTasks).orElse(null));
            out.put("jobsListed", details.getJobs() == null ? 0 : details.getJobs().size());
            return out;
        }
    }

    /** {@code AbstractFlinkService.deleteJar}. */
    private Map<String, Object> deleteJar(Duration timeout, String jarId) throws Exception {
        try (RestClusterClient<String> client = clusterClient()) {
            JarDeleteHeaders headers = JarDeleteHeaders.getInstance();
            JarDeleteMessageParameters parameters = headers.getUnresolvedMessageParameters();
            parameters.jarIdPathParameter.resolve(jarId);
            client.sendRequest(headers, parameters, EmptyRequestBody.getInstance())
                    .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            return Map.of();
        }
    }

    /**
     * {@code AbstractFlinkService.getClusterClient}: a fixed REST address, no HA lookup. The
     * operator writes {@code http://} even with REST SSL on; RestClusterClient uses only host and
     * port, and its RestClient speaks TLS when the configuration says so.
     */
    private RestClusterClient<String> clusterClient() throws Exception {
        String address = "http://" + options.host() + ":" + options.port();
        return new RestClusterClient<>(
                clientConfiguration,
                flinkConfiguration.get("kubernetes.cluster-id"),
                (conf, fatalErrorHandler) -> new StandaloneClientHAServices(address));
    }

    // ---- step bookkeeping -----------------------------------------------------------------

    @FunctionalInterface
    private interface Step {
        Map<String, Object> call(Duration timeout) throws Exception;
    }

    /** Runs one step; a failure is recorded in the result instead of aborting the sequence. */
    private Map<String, Object> attempt(String name, Step step) {
        Map<String, Object> out = new LinkedHashMap<>();
        Duration left = Duration.between(Instant.now(), deadline);
        Duration timeout = left.compareTo(options.callTimeout()) < 0 ? left : options.callTimeout();
        try {
            if (timeout.isNegative() || timeout.isZero()) {
                throw new TimeoutException("overall time budget of " + OVERALL_BUDGET + " used up");
            }
            Map<String, Object> fields = step.call(timeout);
            out.put("ok", true);
            out.putAll(fields);
        } catch (Exception e) {
            out.put("ok", false);
            describeFailure(e, timeout, out);
            LOG.warn("step {} failed: {}", name, firstLine(String.valueOf(out.get("error"))));
        }
        return out;
    }

    private static void describeFailure(Exception e, Duration timeout, Map<String, Object> out) {
        Optional<RestClientException> rest = ExceptionUtils.findThrowable(e, RestClientException.class);
        if (rest.isPresent()) {
            // Message is the server's "errors" list as List.toString(); status is the HTTP status.
            out.put("error", rest.get().getMessage());
            out.put("httpStatus", rest.get().getHttpResponseStatus().code());
        } else if (e instanceof TimeoutException) {
            // Our own Future.get() gave up; RestClusterClient may still have been retrying.
            out.put("error", "timeout: no response within " + timeout.toMillis() + " ms");
        } else {
            out.put("error", ExceptionUtils.stripExecutionException(e).toString());
        }
    }

    private static Map<String, Object> skipped() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("ok", false);
        out.put("error", "skipped: upload did not return a jar id");
        return out;
    }

    /** Top-level JSON fields of the run body as RestClient serializes it (same strict mapper). */
    private static List<String> jsonFieldNames(JarRunRequestBody body) {
        try {
            var mapper = RestMapperUtils.getStrictObjectMapper();
            Map<?, ?> json = mapper.readValue(mapper.writeValueAsString(body), Map.class);
            List<String> names = new ArrayList<>();
            json.keySet().forEach(k -> names.add(String.valueOf(k)));
            return names;
        } catch (Exception e) {
            return List.of("<not serializable: " + e + ">");
        }
    }

    private static String firstLine(String s) {
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }

    private static ThreadFactory daemonThreads() {
        return runnable -> {
            Thread t = new Thread(runnable, "compat-client");
            t.setDaemon(true);
            return t;
        };
    }

    /** Last line of defence against a hang inside a client close(): exit 1 after the budget. */
    private static void startWatchdog(Duration after) {
        Thread watchdog =
                new Thread(
                        () -> {
                            try {
                                Thread.sleep(after.toMillis());
                                System.err.println("watchdog: sequence exceeded " + after);
                                Runtime.getRuntime().halt(1);
                            } catch (InterruptedException ignored) {
                                // never interrupted
                            }
                        },
                        "compat-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }
}
