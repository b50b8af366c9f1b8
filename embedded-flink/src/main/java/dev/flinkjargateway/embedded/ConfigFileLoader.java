package dev.flinkjargateway.embedded;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.YamlParserUtils;

/**
 * Reads an extra Flink configuration file with Flink's own YAML parser, so values mean exactly
 * what they would mean in a cluster's {@code config.yaml}: flat {@code key: value} lines, nested
 * maps, {@code #} comments, quoting and YAML lists all work.
 *
 * <p>{@code GlobalConfiguration.loadConfiguration} is not used because it insists on a directory
 * holding a file named {@code config.yaml}; the flattening below mirrors its private {@code
 * flatten}.
 */
final class ConfigFileLoader {

    private ConfigFileLoader() {}

    /** Returns the keys that were applied (values are not returned: they may be secrets). */
    static List<String> applyTo(Path file, Configuration target) throws Exception {
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException("--config file does not exist: " + file);
        }
        final Object document;
        try {
            document = YamlParserUtils.loadYamlFile(file.toFile());
        } catch (ClassCastException e) {
            throw new IllegalArgumentException(
                    "--config file must contain YAML key/value pairs: " + file);
        }
        Map<String, String> flat = new TreeMap<>();
        flatten(asMap(document, file), "", flat);
        flat.forEach(target::setString);
        return List.copyOf(flat.keySet());
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object document, Path file) {
        if (!(document instanceof Map)) {
            throw new IllegalArgumentException(
                    "--config file must contain YAML key/value pairs: " + file);
        }
        return (Map<String, Object>) document;
    }

    private static void flatten(Map<String, Object> node, String prefix, Map<String, String> out) {
        node.forEach(
                (rawKey, value) -> {
                    String key = prefix + rawKey;
                    if (value instanceof Map) {
                        @SuppressWarnings("unchecked")
                        Map<String, Object> child = (Map<String, Object>) value;
                        flatten(child, key + ".", out);
                    } else if (value instanceof List) {
                        // Flink's list/map options parse this YAML flow form back.
                        out.put(key, YamlParserUtils.toYAMLString(value));
                    } else if (value != null) {
                        // A key without a value ("key:") is ignored, as if it were absent.
                        out.put(key, String.valueOf(value));
                    }
                });
    }
}
