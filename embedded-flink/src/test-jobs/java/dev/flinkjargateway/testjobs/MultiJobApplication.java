package dev.flinkjargateway.testjobs;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * A Flink 2.3 application with two jobs ({@code target/test-jars/MultiJobApplication.jar}), for
 * {@code POST /jars/:jarid/run-application}: main() runs a bounded first job to its end, then
 * loads a class it had not touched before ({@link Second}, so the jar must still be there) and
 * submits a second job. {@code --keep-running}: the second job runs until cancelled.
 */
public class MultiJobApplication {
    public static void main(String[] args) throws Exception {
        boolean keepRunning = args.length > 0 && "--keep-running".equals(args[0]);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setRuntimeMode(RuntimeExecutionMode.BATCH);
        env.fromData(1, 2, 3).map(new Twice()).print();
        env.execute("multi-job-first");
        Second.run(keepRunning);
    }

    static final class Twice implements MapFunction<Integer, Integer> {
        @Override
        public Integer map(Integer value) {
            return value * 2;
        }
    }

    /** Loaded only after the first job has finished. */
    static final class Second {
        static void run(boolean keepRunning) throws Exception {
            StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
            if (keepRunning) {
                env.fromSequence(0, Long.MAX_VALUE).map(new Slow()).print();
            } else {
                env.setRuntimeMode(RuntimeExecutionMode.BATCH);
                env.fromData(4, 5, 6).map(new Twice()).print();
            }
            env.execute("multi-job-second");
        }
    }

    static final class Slow implements MapFunction<Long, Long> {
        @Override
        public Long map(Long value) throws Exception {
            Thread.sleep(100);
            return value;
        }
    }
}
