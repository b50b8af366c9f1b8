package dev.flinkjargateway.compat;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.SecurityOptions;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * The operator's REST client identity with REST SSL on: {@code
 * AbstractFlinkService.getOperatorRestConfig} (used by {@code getRestClient} for the upload and by
 * {@code getClusterClient} for everything else).
 *
 * <p>When the session cluster's configuration has {@code security.ssl.rest.enabled: true}, the
 * operator replaces the cluster's REST truststore, and with {@code authentication-enabled} its
 * keystore, with the operator pod's own files named by {@code OPERATOR_TRUSTSTORE_PATH},
 * {@code OPERATOR_KEYSTORE_PATH} and {@code OPERATOR_KEYSTORE_PASSWORD} (one password for the
 * keystore, the key and the truststore). The store types are not overridden: they stay the
 * cluster's ({@code security.ssl.rest.keystore-type}/{@code truststore-type}). Only the client
 * configuration changes; the {@code flinkConfiguration} of {@code /run} is still the cluster's.
 * Without {@code OPERATOR_TRUSTSTORE_PATH} (or when that file is missing) nothing is replaced.
 */
final class OperatorRestConfig {

    static final String ENV_KEYSTORE_PATH = "OPERATOR_KEYSTORE_PATH";
    static final String ENV_KEYSTORE_PASSWORD = "OPERATOR_KEYSTORE_PASSWORD";
    static final String ENV_TRUSTSTORE_PATH = "OPERATOR_TRUSTSTORE_PATH";

    private OperatorRestConfig() {}

    static Configuration apply(Configuration clusterConf, Map<String, String> env) {
        if (!SecurityOptions.isRestSSLEnabled(clusterConf)) {
            return clusterConf;
        }
        String truststore = blankToNull(env.get(ENV_TRUSTSTORE_PATH));
        if (truststore == null || Files.notExists(Path.of(truststore))) {
            return clusterConf;
        }
        Configuration conf = new Configuration(clusterConf);
        String password = required(env, ENV_KEYSTORE_PASSWORD);
        conf.set(SecurityOptions.SSL_REST_TRUSTSTORE, truststore);
        conf.set(SecurityOptions.SSL_REST_TRUSTSTORE_PASSWORD, password);
        String keystore = blankToNull(env.get(ENV_KEYSTORE_PATH));
        if (SecurityOptions.isRestSSLAuthenticationEnabled(conf) && keystore != null) {
            conf.set(SecurityOptions.SSL_REST_KEYSTORE, keystore);
            conf.set(SecurityOptions.SSL_REST_KEYSTORE_PASSWORD, password);
            conf.set(SecurityOptions.SSL_REST_KEY_PASSWORD, password);
        } else {
            conf.removeConfig(SecurityOptions.SSL_REST_KEYSTORE);
            conf.removeConfig(SecurityOptions.SSL_REST_KEYSTORE_PASSWORD);
        }
        conf.removeConfig(SecurityOptions.SSL_TRUSTSTORE);
        conf.removeConfig(SecurityOptions.SSL_TRUSTSTORE_PASSWORD);
        conf.removeConfig(SecurityOptions.SSL_KEYSTORE);
        conf.removeConfig(SecurityOptions.SSL_KEYSTORE_PASSWORD);
        return conf;
    }

    private static String required(Map<String, String> env, String name) {
        String value = blankToNull(env.get(name));
        if (value == null) {
            throw new IllegalStateException("environment variable " + name + " is not set");
        }
        return value;
    }

    private static String blankToNull(String s) {
        return s == null || s.isBlank() ? null : s;
    }
}
