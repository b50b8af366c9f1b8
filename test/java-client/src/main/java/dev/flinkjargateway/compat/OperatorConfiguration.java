package dev.flinkjargateway.compat;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A stand-in for the operator's {@code conf.toMap()}: the effective session-job configuration it
 * puts into {@code flinkConfiguration} of every run request. Real operator maps carry the session
 * cluster's config, {@code kubernetes.*}, {@code kubernetes.operator.*} and job options, including
 * credentials; two fake secrets are included so the gateway's redaction can be checked.
 */
final class OperatorConfiguration {

    static final String ARTIFACT_HEADER_SECRET = "Authorization:Bearer compat-secret-123";
    static final String S3_SECRET = "compat-secret-456";

    private OperatorConfiguration() {}

    static Map<String, String> sessionJobConfig(int restPort) {
        Map<String, String> conf = new LinkedHashMap<>();
        // Session cluster identity, as FlinkConfigBuilder writes it.
        conf.put("kubernetes.cluster-id", "compat-session");
        conf.put("kubernetes.namespace", "flink-jobs");
        conf.put("kubernetes.service-account", "flink");
        conf.put("kubernetes.container.image.ref", "flink:2.1");
        conf.put("kubernetes.container.image.pull-policy", "IfNotPresent");
        conf.put("kubernetes.rest-service.exposed.type", "ClusterIP");
        conf.put("kubernetes.jobmanager.cpu.amount", "1.0");
        conf.put("kubernetes.taskmanager.cpu.amount", "1.0");
        conf.put("kubernetes.jobmanager.replicas", "1");
        conf.put("kubernetes.jobmanager.owner.reference", "apiVersion:flink.apache.org/v1beta1,kind:FlinkDeployment,name:compat-session,uid:0b7c1a52-7d1e-4e55-9c1a-3f0e2c9d4b11,controller:false,blockOwnerDeletion:true");
        conf.put("kubernetes.internal.jobmanager.entrypoint.class", "org.apache.flink.kubernetes.entrypoint.KubernetesSessionClusterEntrypoint");
        conf.put("kubernetes.pod-template-file.jobmanager", "/tmp/flink_op_generated_podTemplate_4711.yaml");
        conf.put("kubernetes.pod-template-file.taskmanager", "/tmp/flink_op_generated_podTemplate_4712.yaml");
        conf.put("$internal.flink.version", "v2_1");
        conf.put("execution.target", "kubernetes-session");
        // Operator settings leak into the job config because the operator merges everything.
        conf.put("kubernetes.operator.reconcile.interval", "15 s");
        conf.put("kubernetes.operator.observer.progress-check.interval", "10 s");
        conf.put("kubernetes.operator.flink.client.timeout", "10 s");
        conf.put("kubernetes.operator.job.upgrade.last-state-fallback.enabled", "true");
        conf.put("kubernetes.operator.savepoint.history.max.age", "24 h");
        conf.put("kubernetes.operator.periodic.savepoint.interval", "0");
        conf.put("kubernetes.operator.user.artifacts.base.dir", "/opt/flink/artifacts");
        conf.put("kubernetes.operator.user.artifacts.http.header", ARTIFACT_HEADER_SECRET);
        conf.put("kubernetes.operator.metrics.reporter.slf4j.factory.class", "org.apache.flink.metrics.slf4j.Slf4jReporterFactory");
        // Cluster sizing and ports.
        conf.put("jobmanager.memory.process.size", "1600m");
        conf.put("taskmanager.memory.process.size", "1728m");
        conf.put("taskmanager.numberOfTaskSlots", "2");
        conf.put("jobmanager.rpc.port", "6123");
        conf.put("taskmanager.rpc.port", "6122");
        conf.put("blob.server.port", "6124");
        conf.put("rest.port", Integer.toString(restPort));
        conf.put("web.cancel.enable", "false");
        // Job options from the FlinkSessionJob spec.
        conf.put("parallelism.default", "1");
        conf.put("execution.checkpointing.interval", "60 s");
        conf.put("execution.checkpointing.dir", "file:///tmp/flink-compat/checkpoints");
        conf.put("execution.checkpointing.savepoint-dir", "file:///tmp/flink-compat/savepoints");
        conf.put("state.backend.type", "hashmap");
        conf.put("pipeline.max-parallelism", "128");
        // Credentials a tenant might put into its session-job flinkConfiguration.
        conf.put("s3.access-key", "compat-access-key");
        conf.put("s3.secret-key", S3_SECRET);
        conf.put("s3.endpoint", "https://s3.example.invalid");
        return conf;
    }
}
