package dev.flinkjargateway.tokens;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.Callable;
import java.util.concurrent.Delayed;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.security.token.DefaultDelegationTokenManager;
import org.apache.flink.util.concurrent.ScheduledExecutor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The bridge under Flink's own {@link DefaultDelegationTokenManager} (2.1.3; 1.20–2.3 share its
 * scheduling: one cycle for every provider, at the earliest renewal any of them reports, a fixed
 * {@code security.delegation.tokens.renewal.retry.backoff} after a failed cycle) beside a second
 * provider ({@link CountingProvider}), against a fake gateway on loopback.
 *
 * <p>The manager's scheduled executor is a recording one: each cycle's delay is what the manager
 * computed from the reported renewal time, and the test runs the cycles one after another on a
 * virtual timeline (the delays add up), so an hour of cycles takes milliseconds and no assertion
 * depends on how fast the machine is. With {@code -Dbridge.cycles.json=<file>} it also writes the
 * figures of {@code bench/token-bridge-cycles.sh}.
 */
class FlinkManagerCyclesTest {

    private static final long HOUR = 3_600_000;

    @TempDir Path dir;
    private HttpServer server;
    /** nextUpdateAt the fake gateway answers, as a function of the virtual time; null = field absent. */
    private volatile LongFunction<Long> nextUpdateOffset = t -> null;
    private volatile boolean answerSchedules = true;
    private volatile long virtualNow;
    private final RecordingScheduler scheduler = new RecordingScheduler();

    @BeforeEach
    void start() throws Exception {
        CountingProvider.OBTAINS.set(0);
        CountingProvider.FAILURES_TO_COME.set(0);
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext(
                "/gateway/v1/tokens/bridge",
                exchange -> {
                    StringBuilder json = new StringBuilder("{\"version\":1,\"tokens\":{}");
                    if (answerSchedules) {
                        Long offset = nextUpdateOffset.apply(virtualNow);
                        json.append(",\"nextUpdateAt\":")
                                .append(offset == null ? "null" : String.valueOf(System.currentTimeMillis() + offset));
                    }
                    byte[] bytes = json.append('}').toString().getBytes(StandardCharsets.UTF_8);
                    exchange.sendResponseHeaders(200, bytes.length);
                    exchange.getResponseBody().write(bytes);
                    exchange.close();
                });
        server.start();
        Files.writeString(dir.resolve("secret"), "s3cr3t\n");
    }

    @AfterEach
    void stop() {
        server.stop(0);
    }

    private Configuration conf(boolean coProvider, String backoff) {
        Configuration conf = new Configuration();
        conf.setString(BridgeOptions.URL.key(), "http://127.0.0.1:" + server.getAddress().getPort());
        conf.setString(BridgeOptions.SECRET_FILE.key(), dir.resolve("secret").toString());
        conf.setString("security.delegation.token.provider.counting.enabled", String.valueOf(coProvider));
        conf.setString("security.delegation.token.provider.hadoopfs.enabled", "false");
        conf.setString("security.delegation.token.provider.hbase.enabled", "false");
        if (backoff != null) {
            conf.setString("security.delegation.tokens.renewal.retry.backoff", backoff);
        }
        return conf;
    }

    /** Runs Flink's manager for {@code span} ms of virtual time; returns each cycle's start. */
    private List<Long> run(Configuration conf, long span) throws Exception {
        DefaultDelegationTokenManager manager =
                new DefaultDelegationTokenManager(conf, null, scheduler, new DirectExecutor());
        List<Long> cycles = new ArrayList<>();
        virtualNow = 0;
        cycles.add(0L);
        manager.start(tokens -> {});
        while (true) {
            RecordingScheduler.Task next = scheduler.take();
            if (next == null || virtualNow + next.delayMs > span) {
                break;
            }
            virtualNow += next.delayMs;
            cycles.add(virtualNow);
            next.task.run();
        }
        manager.stop();
        return cycles;
    }

    @Test
    void withoutWordFromTheGatewayEveryProviderIsReobtainedEveryPollInterval() throws Exception {
        answerSchedules = false; // a gateway before nextUpdateAt
        run(conf(true, null), HOUR);
        // 10 s poll: 360 cycles an hour, each one re-obtaining the other provider.
        assertTrue(CountingProvider.OBTAINS.get() >= 355, "obtains: " + CountingProvider.OBTAINS.get());
    }

    @Test
    void anIdleGatewayMakesFlinkCallTheOtherProvidersOncePerIdleInterval() throws Exception {
        nextUpdateOffset = t -> null; // nothing scheduled at the gateway
        List<Long> cycles = run(conf(true, null), HOUR);
        // The 1 min idle interval, not the 10 s poll interval.
        long gap = cycles.get(1) - cycles.get(0);
        assertTrue(gap >= 59_000 && gap <= 60_000, "gap: " + gap);
        assertTrue(CountingProvider.OBTAINS.get() <= 61, "obtains: " + CountingProvider.OBTAINS.get());
    }

    @Test
    void aGatewayWithSomethingToDeliverSoonIsPolledEveryPollIntervalUntilItIsDelivered() throws Exception {
        // A job registered at t=30 s waits for its first tokens until the gateway's cycle ends at 85 s.
        nextUpdateOffset = t -> t < 30_000 ? null : t < 85_000 ? 0L : null;
        List<Long> cycles = run(conf(true, null), 5 * 60_000);
        // 0 (idle) → 60 s (now pending: poll) → 70, 80 → 90 s (delivered; nothing pending: idle) → 150 s …
        assertEquals(List.of(0L, 60L, 70L, 80L, 90L, 150L, 210L, 270L), seconds(cycles));
    }

    @Test
    void theBridgeIsCalledJustAfterTheGatewaysNextRenewalWhenThatIsSooner() throws Exception {
        // The gateway renews in 25 s: pull 1 s after it, not the 1 min idle interval.
        nextUpdateOffset = t -> t == 0 ? 25_000L : null;
        List<Long> cycles = run(conf(true, null), 90_000);
        assertEquals(List.of(0L, 26L, 86L), seconds(cycles));
    }

    @Test
    void aFailureOfTheOtherProviderStopsDeliveryForTheRetryBackoff() throws Exception {
        nextUpdateOffset = t -> null;
        CountingProvider.FAILURES_TO_COME.set(1); // the first cycle fails (whole cycle)
        List<Long> withDefault = run(conf(true, null), 2 * HOUR);
        assertEquals(3_600L, seconds(withDefault).get(1)); // Flink's default: 1 h without delivery
        CountingProvider.FAILURES_TO_COME.set(1);
        List<Long> withDocumented = run(conf(true, "10 s"), 60_000);
        assertEquals(10L, seconds(withDocumented).get(1)); // the documented backoff: one poll interval
    }

    /**
     * The figures of {@code bench/token-bridge-cycles.sh}: the other provider's obtains per hour
     * before (a gateway without {@code nextUpdateAt}) and after, idle and with a job arriving every
     * 5 minutes; each job's first-token latency (from its registration to the first bridge pull
     * after the gateway's cycle for it, which takes 1 s); the gateway renews its own tokens every
     * 45 min. Asserts only the ordering of the figures.
     */
    @Test
    void measuresCallsPerHourAndFirstTokenLatency() throws Exception {
        long cycle = 1_000;
        List<Long> jobs = new ArrayList<>();
        for (long t = 150_000; t < HOUR; t += 300_000) {
            jobs.add(t);
        }
        LongFunction<Long> idleGateway = t -> 2_700_000 - (t % 2_700_000);
        LongFunction<Long> busyGateway =
                t -> {
                    for (long j : jobs) {
                        if (t >= j && t < j + cycle) {
                            return 0L;
                        }
                    }
                    return idleGateway.apply(t);
                };
        Map<String, Object> out = new LinkedHashMap<>();

        answerSchedules = false;
        nextUpdateOffset = busyGateway;
        List<Long> before = run(conf(true, null), HOUR);
        out.put("before_calls_per_hour", CountingProvider.OBTAINS.getAndSet(0));
        out.put("before_first_token_latency_ms", latencies(before, jobs, cycle));

        answerSchedules = true;
        nextUpdateOffset = idleGateway;
        run(conf(true, null), HOUR);
        int idle = CountingProvider.OBTAINS.getAndSet(0);
        out.put("after_idle_calls_per_hour", idle);

        nextUpdateOffset = busyGateway;
        List<Long> after = run(conf(true, null), HOUR);
        int busy = CountingProvider.OBTAINS.getAndSet(0);
        out.put("after_with_jobs_calls_per_hour", busy);
        out.put("after_first_token_latency_ms", latencies(after, jobs, cycle));

        Configuration longIdle = conf(true, null);
        longIdle.setString(BridgeOptions.IDLE_INTERVAL.key(), "1 h");
        nextUpdateOffset = idleGateway;
        run(longIdle, HOUR);
        out.put("after_idle_interval_1h_calls_per_hour", CountingProvider.OBTAINS.getAndSet(0));

        CountingProvider.FAILURES_TO_COME.set(1);
        out.put("co_provider_failure_gap_default_backoff_ms", run(conf(true, null), 2 * HOUR).get(1));
        CountingProvider.FAILURES_TO_COME.set(1);
        out.put("co_provider_failure_gap_10s_backoff_ms", run(conf(true, "10 s"), 60_000).get(1));

        int beforeCalls = (Integer) out.get("before_calls_per_hour");
        assertTrue(idle <= busy && busy < beforeCalls / 4, out.toString());
        String file = System.getProperty("bridge.cycles.json");
        if (file != null && !file.isEmpty()) {
            StringBuilder json = new StringBuilder("{");
            out.forEach((k, v) -> json.append(json.length() > 1 ? "," : "").append('"').append(k).append("\":").append(v));
            Files.writeString(Path.of(file), json.append("}\n").toString());
        }
    }

    /** {"mean":…, "max":…}: from each job's registration to the first pull after its tokens exist. */
    private static String latencies(List<Long> cycles, List<Long> jobs, long cycleMs) {
        long sum = 0;
        long max = 0;
        for (long j : jobs) {
            long ready = j + cycleMs;
            long pull = cycles.stream().filter(c -> c >= ready).findFirst().orElse(Long.MAX_VALUE);
            sum += pull - j;
            max = Math.max(max, pull - j);
        }
        return "{\"mean\":" + sum / jobs.size() + ",\"max\":" + max + "}";
    }

    private static List<Long> seconds(List<Long> ms) {
        List<Long> out = new ArrayList<>();
        for (long m : ms) {
            out.add(Math.round(m / 1000.0));
        }
        return out;
    }

    /** Flink's manager's cycles, run one after another without waiting (the test's virtual time). */
    static final class RecordingScheduler implements ScheduledExecutor {
        static final class Task implements ScheduledFuture<Object> {
            final Runnable task;
            final long delayMs;
            volatile boolean cancelled;

            Task(Runnable task, long delayMs) {
                this.task = task;
                this.delayMs = delayMs;
            }

            @Override
            public long getDelay(TimeUnit unit) {
                return unit.convert(delayMs, TimeUnit.MILLISECONDS);
            }

            @Override
            public int compareTo(Delayed o) {
                return Long.compare(delayMs, o.getDelay(TimeUnit.MILLISECONDS));
            }

            @Override
            public boolean cancel(boolean mayInterrupt) {
                cancelled = true;
                return true;
            }

            @Override
            public boolean isCancelled() {
                return cancelled;
            }

            @Override
            public boolean isDone() {
                return cancelled;
            }

            @Override
            public Object get() {
                return null;
            }

            @Override
            public Object get(long timeout, TimeUnit unit) {
                return null;
            }
        }

        private Task pending;

        synchronized Task take() {
            Task t = pending;
            pending = null;
            return t == null || t.cancelled ? null : t;
        }

        @Override
        public synchronized ScheduledFuture<?> schedule(Runnable command, long delay, TimeUnit unit) {
            pending = new Task(command, unit.toMillis(delay));
            return pending;
        }

        @Override
        public <V> ScheduledFuture<V> schedule(Callable<V> callable, long delay, TimeUnit unit) {
            throw new UnsupportedOperationException();
        }

        @Override
        public ScheduledFuture<?> scheduleAtFixedRate(Runnable c, long i, long p, TimeUnit u) {
            throw new UnsupportedOperationException();
        }

        @Override
        public ScheduledFuture<?> scheduleWithFixedDelay(Runnable c, long i, long d, TimeUnit u) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void execute(Runnable command) {
            command.run();
        }
    }

    /** Flink's IO executor, inline. */
    static final class DirectExecutor extends AbstractExecutorService {
        @Override
        public void execute(Runnable command) {
            command.run();
        }

        @Override
        public void shutdown() {}

        @Override
        public List<Runnable> shutdownNow() {
            return List.of();
        }

        @Override
        public boolean isShutdown() {
            return false;
        }

        @Override
        public boolean isTerminated() {
            return false;
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) {
            return true;
        }
    }
}
