package dev.flinkjargateway.compat;

import org.apache.flink.api.common.JobID;
import org.apache.flink.core.execution.RecoveryClaimMode;
import org.apache.flink.runtime.webmonitor.handlers.JarRunRequestBody;

import java.util.List;
import java.util.Map;

/** Builds the operator's run body with the Flink 2.x constructor (no {@code programArgs}, no restoreMode). */
final class RunRequests {

    private RunRequests() {}

    static JarRunRequestBody operatorRunBody(
            String entryClass, int parallelism, JobID jobId, Map<String, String> flinkConfiguration) {
        return new JarRunRequestBody(
                entryClass,
                List.of(), // operator: Arrays.asList(job.getArgs()), empty by default
                parallelism,
                jobId,
                null, // allowNonRestoredState: unset in the session job spec
                null, // savepointPath: initial deployment, no savepoint
                RecoveryClaimMode.NO_CLAIM, // serialized as "claimMode"
                flinkConfiguration);
    }
}
