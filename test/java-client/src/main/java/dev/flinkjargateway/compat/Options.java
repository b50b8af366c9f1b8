package dev.flinkjargateway.compat;

import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.SecurityOptions;

import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/** Command-line options; any problem is a {@link UsageException} (exit code 2). */
record Options(
        String host,
        int port,
        Path jar,
        String entryClass,
        JobID jobId,
        Map<String, String> extraConf,
        Duration callTimeout) {

    static final String USAGE =
            "usage: OperatorSequence --url http(s)://HOST:PORT --jar PATH/TO/job.jar\n"
                    + "         [--entry-class CLASS] [--job-id 32HEX] [--conf key=value]...\n"
                    + "         [--call-timeout-seconds N (default 60)]";

    static final class UsageException extends Exception {
        UsageException(String message) {
            super(message);
        }
    }

    static Options parse(String[] args) throws UsageException {
        String url = null;
        String jar = null;
        String entryClass = null;
        JobID jobId = null;
        Map<String, String> extraConf = new LinkedHashMap<>();
        long timeoutSeconds = 60;

        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("--help") || flag.equals("-h")) {
                throw new UsageException("help requested");
            }
            if (i + 1 >= args.length) {
                throw new UsageException("missing value for " + flag);
            }
            String value = args[++i];
            switch (flag) {
                case "--url" -> url = value;
                case "--jar" -> jar = value;
                case "--entry-class" -> entryClass = value;
                case "--job-id" -> jobId = parseJobId(value);
                case "--conf" -> {
                    int eq = value.indexOf('=');
                    if (eq <= 0) {
                        throw new UsageException("--conf expects key=value, got: " + value);
                    }
                    extraConf.put(value.substring(0, eq), value.substring(eq + 1));
                }
                case "--call-timeout-seconds" -> timeoutSeconds = parsePositive(flag, value);
                default -> throw new UsageException("unknown option: " + flag);
            }
        }

        if (url == null || jar == null) {
            throw new UsageException("--url and --jar are required");
        }
        URI uri = URI.create(url);
        if (uri.getHost() == null || uri.getPort() < 0) {
            throw new UsageException("--url must look like http(s)://HOST:PORT, got: " + url);
        }
        // Flink's RestClient takes the scheme from the configuration, not from a URL (the operator
        // even builds an http:// address with REST SSL on); the flag must just not contradict it.
        boolean ssl = SecurityOptions.isRestSSLEnabled(Configuration.fromMap(extraConf));
        if (!(ssl ? "https" : "http").equals(uri.getScheme())) {
            throw new UsageException(
                    "--url is "
                            + url
                            + " but security.ssl.rest.enabled is "
                            + ssl
                            + ": use https:// exactly when --conf security.ssl.rest.enabled=true");
        }
        Path jarPath = Path.of(jar).toAbsolutePath();
        if (!Files.isRegularFile(jarPath)) {
            throw new UsageException("--jar is not a file: " + jarPath);
        }
        return new Options(
                uri.getHost(),
                uri.getPort(),
                jarPath,
                entryClass,
                jobId != null ? jobId : JobID.generate(),
                extraConf,
                Duration.ofSeconds(timeoutSeconds));
    }

    private static JobID parseJobId(String value) throws UsageException {
        if (!value.matches("[0-9a-f]{32}")) {
            throw new UsageException("--job-id must be 32 lowercase hex characters, got: " + value);
        }
        return JobID.fromHexString(value);
    }

    private static long parsePositive(String flag, String value) throws UsageException {
        try {
            long n = Long.parseLong(value);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException ignored) {
            // fall through to the usage error
        }
        throw new UsageException(flag + " expects a positive integer, got: " + value);
    }
}
