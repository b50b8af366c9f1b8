package dev.flinkjargateway.compat;

import org.apache.flink.api.common.JobID;
import org.apache.flink.core.execution.RestoreMode;
import org.apache.flink.runtime.webmonitor.handlers.JarRunRequestBody;

import java.util.List;
import java.util.Map;

/**
 * Builds the run body exactly as the operator does with its 1.20 client classes: the 10-argument
 * constructor, {@code programArgs} null, deprecated {@code restoreMode} null and {@code claimMode}
 * set (the operator's branch for target Flink >= 1.20).
 */
final class RunRequests {

    private RunRequests() {}

    static JarRunRequestBody operatorRunBody(
            String entryClass, int parallelism, JobID jobId, Map<String, String> flinkConfiguration) {
        return new JarRunRequestBody(
                entryClass,
                null, // programArgs: never sent by the operator
                List.of(), // operator: Arrays.asList(job.getArgs()), empty by default
                parallelism,
                jobId,
                null, // allowNonRestoredState: unset in the session job spec
                null, // savepointPath: initial deployment, no savepoint
                null, // restoreMode (deprecated JSON field "restoreMode")
                RestoreMode.DEFAULT, // NO_CLAIM, serialized as "claimMode"
                flinkConfiguration);
    }
}
