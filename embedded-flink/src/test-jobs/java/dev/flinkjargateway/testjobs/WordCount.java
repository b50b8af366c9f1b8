package dev.flinkjargateway.testjobs;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

/**
 * Bounded word count over built-in text, packaged as {@code target/test-jars/WordCount.jar}.
 *
 * <p>Stand-in for Flink's {@code flink-examples-streaming:WordCount} jar, which is not available
 * from the package registry reachable here. Like that example it needs no arguments, reads
 * built-in data, prints {@code (word,count)} records and finishes on its own. Options:
 * {@code --execution-mode STREAMING|BATCH} (default STREAMING), {@code --fail} (main() throws
 * before submitting, to test error paths).
 */
public class WordCount {

    static final String[] LINES = {
        "To be, or not to be,--that is the question:--",
        "Whether 'tis nobler in the mind to suffer",
        "The slings and arrows of outrageous fortune",
        "Or to take arms against a sea of troubles,",
        "And by opposing end them?--To die,--to sleep,--",
        "No more; and by a sleep to say we end",
        "The heartache, and the thousand natural shocks",
        "That flesh is heir to,--'tis a consummation",
        "Devoutly to be wish'd. To die,--to sleep;--",
        "To sleep! perchance to dream:--ay, there's the rub;",
    };

    public static void main(String[] args) throws Exception {
        RuntimeExecutionMode mode = RuntimeExecutionMode.STREAMING;
        for (int i = 0; i < args.length; i++) {
            if ("--execution-mode".equals(args[i]) && i + 1 < args.length) {
                mode = RuntimeExecutionMode.valueOf(args[++i].toUpperCase());
            } else if ("--fail".equals(args[i])) {
                throw new IllegalArgumentException("WordCount asked to fail by --fail");
            } else {
                throw new IllegalArgumentException("Unknown argument: " + args[i]);
            }
        }

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setRuntimeMode(mode);
        env.fromData(LINES)
                .name("in-memory-lines")
                .flatMap(new Tokenizer())
                .name("tokenizer")
                .keyBy(value -> value.f0)
                .sum(1)
                .name("counter")
                .print()
                .name("print-sink");
        env.execute("WordCount");
    }

    /** Splits lines into lower-case words and emits (word, 1). */
    public static final class Tokenizer implements FlatMapFunction<String, Tuple2<String, Integer>> {
        @Override
        public void flatMap(String line, Collector<Tuple2<String, Integer>> out) {
            for (String token : line.toLowerCase().split("\\W+")) {
                if (!token.isEmpty()) {
                    out.collect(new Tuple2<>(token, 1));
                }
            }
        }
    }
}
