package dev.flinkjargateway.testjobs;

import dev.flinkjargateway.tokens.GatewayTokens;
import dev.flinkjargateway.tokens.JobTokens;
import java.util.Optional;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Checks, inside a running TASK, that flink-jar-gateway's token bridge delivered this job's tokens:
 * a map function reads {@code GatewayTokens.forJob(<its own job id from the RuntimeContext>)} and
 * fails the job when the provider's entry for the job is absent, or does not contain the expected
 * text, within the timeout (delivery is by polling, so it retries). The job finishes otherwise.
 *
 * <p>Entry class {@code dev.flinkjargateway.testjobs.TokenProbe} in {@code GatewayTestJob.jar}.
 * Arguments: {@code --provider <name>} (required), {@code --expect <text>} (default: any entry),
 * {@code --timeout-ms <n>} (default 30000), {@code --hold-ms <n>} (default 0: how long the task
 * keeps running after it found its token, so a test can look at the job while it runs), {@code
 * --distinct <n>} (default 1: how many different entries the task must see, i.e. renewals observed
 * in the task plus one). It prints only provider names and the job id, never a token. The bridge classes come from the cluster's class path (they are not in this jar).
 */
public class TokenProbe {

    public static void main(String[] args) throws Exception {
        String provider = null;
        String expect = "";
        long timeoutMs = 30_000;
        long holdMs = 0;
        int distinct = 1;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--provider":
                    provider = args[++i];
                    break;
                case "--expect":
                    expect = args[++i];
                    break;
                case "--timeout-ms":
                    timeoutMs = Long.parseLong(args[++i]);
                    break;
                case "--hold-ms":
                    holdMs = Long.parseLong(args[++i]);
                    break;
                case "--distinct":
                    distinct = Integer.parseInt(args[++i]);
                    break;
                default:
                    throw new IllegalArgumentException("Unknown argument: " + args[i]);
            }
        }
        if (provider == null) {
            throw new IllegalArgumentException("--provider <name> is required");
        }
        Configuration conf = new Configuration();
        // A missing token must fail the job, not restart it.
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.fromData(1)
                .name("one-element")
                .map(new Probe(provider, expect, timeoutMs, holdMs, distinct))
                .name("token-probe")
                .print()
                .name("print-sink");
        env.execute("TokenProbe");
    }

    /** Runs in the TaskManager: this is where a job's code needs its tokens. */
    public static final class Probe extends RichMapFunction<Integer, String> {
        private static final long serialVersionUID = 1L;
        private final String provider;
        private final String expect;
        private final long timeoutMs;
        private final long holdMs;
        private final int distinct;

        Probe(String provider, String expect, long timeoutMs, long holdMs, int distinct) {
            this.provider = provider;
            this.expect = expect;
            this.timeoutMs = timeoutMs;
            this.holdMs = holdMs;
            this.distinct = distinct;
        }

        @Override
        public String map(Integer value) throws Exception {
            JobID jobId = getRuntimeContext().getJobInfo().getJobId();
            long deadline = System.currentTimeMillis() + timeoutMs;
            JobTokens tokens;
            // Hashes only: the entries themselves are secrets.
            java.util.Set<Integer> seen = new java.util.HashSet<>();
            for (; ; ) {
                tokens = GatewayTokens.forJob(jobId);
                Optional<String> entry = tokens.get(provider);
                if (entry.isPresent() && entry.get().contains(expect)) {
                    seen.add(entry.get().hashCode());
                }
                if (seen.size() >= distinct) {
                    Thread.sleep(holdMs);
                    return "token-probe: job " + jobId + " has its " + provider + " token in its task (" + seen.size() + " versions seen)";
                }
                if (System.currentTimeMillis() >= deadline) {
                    break;
                }
                Thread.sleep(200);
            }
            throw new IllegalStateException(
                    "token-probe: no matching "
                            + provider
                            + " token for job "
                            + jobId
                            + " in this task within "
                            + timeoutMs
                            + " ms (versions seen: "
                            + seen.size()
                            + " of "
                            + distinct
                            + "; providers with an entry for the job: "
                            + tokens.providers()
                            + "; deliveries to this JVM: "
                            + GatewayTokens.updates()
                            + ")");
        }
    }
}
