package dev.flinkjargateway.compat;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.client.program.rest.RestClusterClient;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.highavailability.nonha.standalone.StandaloneClientHAServices;
import org.apache.flink.runtime.rest.FileUpload;
import org.apache.flink.runtime.rest.RestClient;
import org.apache.flink.runtime.rest.messages.EmptyMessageParameters;
import org.apache.flink.runtime.rest.messages.EmptyRequestBody;
import org.apache.flink.runtime.rest.util.RestConstants;
import org.apache.flink.runtime.rest.util.RestMapperUtils;
import org.apache.flink.runtime.webmonitor.handlers.JarDeleteHeaders;
import org.apache.flink.runtime.webmonitor.handlers.JarDeleteMessageParameters;
import org.apache.flink.runtime.webmonitor.handlers.JarRunHeaders;
import org.apache.flink.runtime.webmonitor.handlers.JarRunMessageParameters;
import org.apache.flink.runtime.webmonitor.handlers.JarUploadHeaders;

import java.io.InputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * The benchmark's Java two-hop anchor (bench/measures/link.ts): what the Flink
 * Kubernetes Operator does for a session job whose jar is at a URL. It downloads the jar with
 * Java into a temporary file ({@code URL.openStream()} copied to a file, as the operator's
 * {@code HttpArtifactFetcher} does), uploads it with Flink's {@link RestClient}, runs it with a
 * {@link RestClusterClient}, deletes the jar and the temporary file. Everything runs in one JVM,
 * timed from inside, so the JVM's start-up and class loading (which a long-running operator does
 * not pay per job) are not counted; the first {@code --warmups} runs are not reported. Between
 * runs it waits, untimed, until the job has ended.
 *
 * <pre>
 * TwoHop --url http://HOST:PORT --jar-url URL --entry-class CLASS [--warmups 1] [--reps 5]
 * </pre>
 *
 * Stdout: one JSON object, {@code {"runs":[{"downloadMs","uploadMs","runMs","deleteMs","totalMs","jobId"}...]}}.
 */
public final class TwoHop {

    private TwoHop() {}

    public static void main(String[] args) throws Exception {
        PrintStream stdout = System.out;
        System.setOut(System.err);
        Map<String, String> opts = new LinkedHashMap<>(Map.of("--warmups", "1", "--reps", "5"));
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        for (String required : List.of("--url", "--jar-url", "--entry-class")) {
            if (!opts.containsKey(required)) {
                System.err.println("usage: TwoHop --url http://HOST:PORT --jar-url URL --entry-class CLASS [--warmups N] [--reps N]");
                System.exit(2);
            }
        }
        URI rest = URI.create(opts.get("--url"));
        URI jarUrl = URI.create(opts.get("--jar-url"));
        String entryClass = opts.get("--entry-class");
        int warmups = Integer.parseInt(opts.get("--warmups"));
        int reps = Integer.parseInt(opts.get("--reps"));
        String fileName = Path.of(jarUrl.getPath()).getFileName().toString();

        Configuration conf = new Configuration();
        ExecutorService executor = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "two-hop");
            t.setDaemon(true);
            return t;
        });
        String address = "http://" + rest.getHost() + ":" + rest.getPort();
        List<Map<String, Object>> runs = new ArrayList<>();
        try (RestClient restClient = new RestClient(conf, executor);
                RestClusterClient<String> cluster = new RestClusterClient<>(conf, "two-hop", (c, h) -> new StandaloneClientHAServices(address))) {
            for (int r = 0; r < warmups + reps; r++) {
                JobID jobId = JobID.generate();
                Path dir = Files.createTempDirectory("two-hop-");
                Path file = dir.resolve(fileName);
                long t0 = System.nanoTime();
                try (InputStream in = jarUrl.toURL().openStream()) {
                    Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                }
                long t1 = System.nanoTime();
                String filename = restClient
                        .sendRequest(rest.getHost(), rest.getPort(), JarUploadHeaders.getInstance(), EmptyMessageParameters.getInstance(), EmptyRequestBody.getInstance(),
                                List.of(new FileUpload(file, RestConstants.CONTENT_TYPE_JAR)))
                        .get(300, TimeUnit.SECONDS)
                        .getFilename();
                String jarId = filename.substring(filename.lastIndexOf('/') + 1);
                long t2 = System.nanoTime();
                JarRunHeaders runHeaders = JarRunHeaders.getInstance();
                JarRunMessageParameters runParams = runHeaders.getUnresolvedMessageParameters();
                runParams.jarIdPathParameter.resolve(jarId);
                cluster.sendRequest(runHeaders, runParams, RunRequests.operatorRunBody(entryClass, 1, jobId, Map.of("parallelism.default", "1"))).get(300, TimeUnit.SECONDS);
                long t3 = System.nanoTime();
                JarDeleteHeaders deleteHeaders = JarDeleteHeaders.getInstance();
                JarDeleteMessageParameters deleteParams = deleteHeaders.getUnresolvedMessageParameters();
                deleteParams.jarIdPathParameter.resolve(jarId);
                cluster.sendRequest(deleteHeaders, deleteParams, EmptyRequestBody.getInstance()).get(60, TimeUnit.SECONDS);
                Files.delete(file);
                Files.delete(dir);
                long t4 = System.nanoTime();
                awaitEnd(cluster, jobId);
                if (r < warmups) continue;
                Map<String, Object> run = new LinkedHashMap<>();
                run.put("downloadMs", ms(t1 - t0));
                run.put("uploadMs", ms(t2 - t1));
                run.put("runMs", ms(t3 - t2));
                run.put("deleteMs", ms(t4 - t3));
                run.put("totalMs", ms(t4 - t0));
                run.put("jobId", jobId.toHexString());
                runs.add(run);
            }
        }
        stdout.println(RestMapperUtils.getStrictObjectMapper().writeValueAsString(Map.of("runs", runs)));
        stdout.flush();
        System.exit(0);
    }

    /** Waits until the job is globally terminal (at most 3 minutes), so that runs do not pile up. */
    private static void awaitEnd(RestClusterClient<String> cluster, JobID jobId) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(3);
        while (System.nanoTime() < deadline) {
            JobStatus status = cluster.getJobStatus(jobId).get(60, TimeUnit.SECONDS);
            if (status.isGloballyTerminalState()) {
                if (status != JobStatus.FINISHED) throw new IllegalStateException("job " + jobId + " ended " + status);
                return;
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("job " + jobId + " did not end within 3 minutes");
    }

    private static double ms(long nanos) {
        return Math.round(nanos / 1e4) / 100.0;
    }
}
