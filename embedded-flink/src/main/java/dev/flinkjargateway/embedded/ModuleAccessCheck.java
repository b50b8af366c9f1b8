package dev.flinkjargateway.embedded;

import java.net.URL;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.CodeSource;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.jar.Attributes;
import java.util.jar.JarFile;

/**
 * Fails fast when the JVM lacks the {@code --add-opens} flags Flink needs on Java 17.
 *
 * <p>Without them the cluster starts fine, but the first {@code POST /jars/:id/run} dies with an
 * {@code InaccessibleObjectException} in a static initializer, which poisons that class for the
 * rest of the process. The required list is read from this jar's own {@code Add-Opens} manifest
 * attribute (the single source of truth; {@code java -jar} applies it automatically).
 */
final class ModuleAccessCheck {

    private ModuleAccessCheck() {}

    static void verify() {
        Optional<String> addOpens = ownManifestAttribute("Add-Opens");
        if (addOpens.isEmpty()) {
            return; // not running from the packaged jar (e.g. an IDE): nothing to compare with
        }
        Module unnamed = ModuleAccessCheck.class.getModule();
        List<String> missing = new ArrayList<>();
        for (String entry : addOpens.get().trim().split("\\s+")) {
            String[] moduleAndPackage = entry.split("/", 2);
            Optional<Module> module = ModuleLayer.boot().findModule(moduleAndPackage[0]);
            if (module.isPresent() && !module.get().isOpen(moduleAndPackage[1], unnamed)) {
                missing.add(entry);
            }
        }
        if (!missing.isEmpty()) {
            throw new IllegalStateException(
                    "the JVM was started without --add-opens for "
                            + missing
                            + "; start it with `java -jar embedded-flink.jar ...` or pass"
                            + " `@embedded-flink/target/jvm.options` before -cp");
        }
    }

    private static Optional<String> ownManifestAttribute(String name) {
        try {
            CodeSource source = ModuleAccessCheck.class.getProtectionDomain().getCodeSource();
            URL location = source == null ? null : source.getLocation();
            if (location == null || !location.getPath().endsWith(".jar")) {
                return Optional.empty();
            }
            Path jar = Paths.get(location.toURI());
            try (JarFile jarFile = new JarFile(jar.toFile())) {
                Attributes attributes = jarFile.getManifest().getMainAttributes();
                return Optional.ofNullable(attributes.getValue(name));
            }
        } catch (Exception e) {
            return Optional.empty();
        }
    }
}
