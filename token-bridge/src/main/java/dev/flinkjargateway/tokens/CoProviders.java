package dev.flinkjargateway.tokens;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.jar.JarFile;
import java.util.zip.ZipEntry;
import org.apache.flink.configuration.ConfigConstants;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.SecurityOptions;
import org.apache.flink.core.security.token.DelegationTokenProvider;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The other delegation-token providers of this JobManager, as far as a provider can see them from
 * its {@code init}: Flink hands it nothing but the configuration. It finds them where Flink's
 * manager does — the service loader over the same class path, and the service files of the jars
 * under the plugins directory ({@code FLINK_PLUGINS_DIR}, read, never loaded) — plus every
 * provider named by a {@code security.delegation.token.provider.<name>.*} key. Disabled ones
 * ({@code ...<name>.enabled: false}) are left out.
 */
final class CoProviders {

    private static final Logger LOG = LoggerFactory.getLogger(GatewayDelegationTokenProvider.class);
    private static final String SERVICE_FILE =
            "META-INF/services/" + DelegationTokenProvider.class.getName();
    /** Flink's own providers that obtain nothing unless Kerberos credentials are configured. */
    private static final Set<String> KERBEROS_ONLY = Set.of("hadoopfs", "hbase");

    private CoProviders() {}

    /** Service name → where it was seen, for every enabled provider other than the bridge. */
    static TreeMap<String, String> find(Configuration conf, ClassLoader loader, Path pluginsDir) {
        TreeMap<String, String> found = new TreeMap<>();
        try {
            Iterator<DelegationTokenProvider> it =
                    ServiceLoader.load(DelegationTokenProvider.class, loader).iterator();
            while (it.hasNext()) {
                try {
                    found.putIfAbsent(it.next().serviceName(), "class path");
                } catch (ServiceConfigurationError | LinkageError e) {
                    LOG.debug("Gateway token bridge: a provider on the class path cannot be loaded", e);
                }
            }
        } catch (ServiceConfigurationError | LinkageError e) {
            LOG.debug("Gateway token bridge: cannot list the providers on the class path", e);
        }
        for (String className : pluginServiceClasses(pluginsDir)) {
            // Not loaded (a plugin's classes are the plugin's), so named after its class: its
            // enabled key cannot be checked without its service name.
            found.putIfAbsent(className, "plugins directory " + pluginsDir);
        }
        String prefix = DelegationTokenProvider.CONFIG_PREFIX + ".";
        for (String key : conf.keySet()) {
            if (key.startsWith(prefix)) {
                String rest = key.substring(prefix.length());
                int dot = rest.indexOf('.');
                if (dot > 0) {
                    found.putIfAbsent(rest.substring(0, dot), "configuration key " + key);
                }
            }
        }
        found.remove(GatewayDelegationTokenProvider.SERVICE_NAME);
        found.keySet().removeIf(name -> !isEnabled(conf, name));
        return found;
    }

    static boolean isEnabled(Configuration conf, String name) {
        return SecurityOptions.forProvider(conf, name)
                .get(SecurityOptions.DELEGATION_TOKEN_PROVIDER_ENABLED);
    }

    /** Whether Kerberos credentials are configured, without which Flink's Hadoop providers stay idle. */
    static boolean kerberosConfigured(Configuration conf) {
        return conf.getOptional(SecurityOptions.KERBEROS_LOGIN_KEYTAB).isPresent()
                || conf.getOptional(SecurityOptions.KERBEROS_LOGIN_PRINCIPAL).isPresent();
    }

    static void warnAbout(Configuration conf, ClassLoader loader, long pollMs, long idleMs) {
        String dir = System.getenv(ConfigConstants.ENV_FLINK_PLUGINS_DIR);
        Path pluginsDir = Path.of(dir != null ? dir : ConfigConstants.DEFAULT_FLINK_PLUGINS_DIRS);
        TreeMap<String, String> found = find(conf, loader, pluginsDir);
        List<String> active = new ArrayList<>();
        List<String> idle = new ArrayList<>();
        boolean kerberos = kerberosConfigured(conf);
        found.forEach(
                (name, where) -> {
                    if (KERBEROS_ONLY.contains(name) && !kerberos) {
                        idle.add(name);
                    } else {
                        active.add(name + " (" + where + ")");
                    }
                });
        if (!idle.isEmpty()) {
            LOG.info(
                    "Gateway token bridge: Flink's providers {} are loaded but obtain nothing without"
                            + " Kerberos credentials",
                    idle);
        }
        if (active.isEmpty()) {
            return;
        }
        long backoff =
                conf.get(SecurityOptions.DELEGATION_TOKENS_RENEWAL_RETRY_BACKOFF).toMillis();
        LOG.warn(
                "Gateway token bridge: this JobManager also loads the delegation-token provider(s) {}."
                        + " Flink's token manager runs every provider in each cycle, so they obtain"
                        + " tokens again whenever the bridge pulls: every {} ms while the gateway has"
                        + " something to deliver, at least every {} ms otherwise (raise"
                        + " {} to call them less often). A failure of any of them fails the whole cycle"
                        + " and stops gateway token delivery for {} = {} ms{}",
                active,
                pollMs,
                idleMs,
                BridgeOptions.IDLE_INTERVAL.key(),
                SecurityOptions.DELEGATION_TOKENS_RENEWAL_RETRY_BACKOFF.key(),
                backoff,
                backoff > pollMs
                        ? "; set it to the poll interval (" + pollMs + " ms)."
                        : ".");
    }

    /** Provider classes named in the service files of the jars under the plugins directory. */
    static Set<String> pluginServiceClasses(Path pluginsDir) {
        Set<String> out = new TreeSet<>();
        if (pluginsDir == null || !Files.isDirectory(pluginsDir)) {
            return out;
        }
        try (DirectoryStream<Path> plugins = Files.newDirectoryStream(pluginsDir)) {
            for (Path plugin : plugins) {
                if (!Files.isDirectory(plugin)) {
                    continue;
                }
                try (DirectoryStream<Path> jars = Files.newDirectoryStream(plugin, "*.jar")) {
                    for (Path jar : jars) {
                        readServiceFile(jar, out);
                    }
                }
            }
        } catch (IOException e) {
            LOG.debug("Gateway token bridge: cannot read the plugins directory {}", pluginsDir, e);
        }
        return out;
    }

    private static void readServiceFile(Path jar, Set<String> out) {
        try (JarFile file = new JarFile(jar.toFile())) {
            ZipEntry entry = file.getEntry(SERVICE_FILE);
            if (entry == null) {
                return;
            }
            try (InputStream in = file.getInputStream(entry);
                    BufferedReader reader =
                            new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                    String name = line.replaceAll("#.*", "").trim();
                    if (!name.isEmpty()) {
                        out.add(name);
                    }
                }
            }
        } catch (IOException e) {
            LOG.debug("Gateway token bridge: cannot read {}", jar, e);
        }
    }
}
