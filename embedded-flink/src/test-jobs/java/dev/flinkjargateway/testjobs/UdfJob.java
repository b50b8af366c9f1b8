package dev.flinkjargateway.testjobs;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * A bounded job whose task calls {@code dev.flinkjargateway.testudf.Shout}, a class that is NOT in
 * this jar ({@code target/test-jars/UdfJob.jar}): it finishes only when the UDF jar is on the job's
 * user classpath (a nested {@code lib/} jar, as the gateway builds it for
 * {@code user.artifacts.artifact-list}); without it, main() fails to find the class.
 */
public class UdfJob {
    public static void main(String[] args) throws Exception {
        // Fails fast in main() (the JobManager) when the library is missing...
        if (!"HELLO!".equals(dev.flinkjargateway.testudf.Shout.shout("hello"))) {
            throw new IllegalStateException("unexpected UDF result");
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setRuntimeMode(RuntimeExecutionMode.BATCH);
        // ...and is used again in a task (a TaskManager's user classloader).
        env.fromData("a", "b", "c")
                .map(new ShoutMap())
                .map(new CheckMap())
                .print();
        env.execute("udf-job");
    }

    static final class ShoutMap implements MapFunction<String, String> {
        @Override
        public String map(String value) {
            return dev.flinkjargateway.testudf.Shout.shout(value);
        }
    }

    static final class CheckMap implements MapFunction<String, String> {
        @Override
        public String map(String value) {
            if (!value.endsWith("!")) throw new IllegalStateException("the UDF did not run: " + value);
            return value;
        }
    }
}
