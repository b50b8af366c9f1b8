package dev.flinkjargateway.embedded;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Optional;

/** Command line of {@link EmbeddedFlinkCluster}. Deliberately tiny: no secrets ever go here. */
final class LauncherOptions {

    static final int DEFAULT_SLOTS = 4;

    static final String USAGE =
            "Usage: EmbeddedFlinkCluster --upload-dir <dir> [--config <file>] [--slots <n>]"
                    + " [--no-stdin-exit]\n"
                    + "  --upload-dir <dir>  web.upload.dir; jars land in <dir>/flink-web-upload/\n"
                    + "  --config <file>     extra Flink configuration (YAML, e.g. flat 'key: value'"
                    + " lines)\n"
                    + "  --slots <n>         task slots of the single TaskManager (default "
                    + DEFAULT_SLOTS
                    + ")\n"
                    + "  --no-stdin-exit     do not exit on stdin EOF (for manual runs)\n";

    final Path uploadDir;
    final Optional<Path> configFile;
    final int slots;
    final boolean exitOnStdinEof;

    private LauncherOptions(
            Path uploadDir, Optional<Path> configFile, int slots, boolean exitOnStdinEof) {
        this.uploadDir = uploadDir;
        this.configFile = configFile;
        this.slots = slots;
        this.exitOnStdinEof = exitOnStdinEof;
    }

    /** @throws IllegalArgumentException with a user-facing message on any invalid input */
    static LauncherOptions parse(String[] args) {
        Path uploadDir = null;
        Path configFile = null;
        int slots = DEFAULT_SLOTS;
        boolean exitOnStdinEof = true;

        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            switch (arg) {
                case "--upload-dir":
                    uploadDir = Paths.get(value(args, ++i, arg));
                    break;
                case "--config":
                    configFile = Paths.get(value(args, ++i, arg));
                    break;
                case "--slots":
                    String raw = value(args, ++i, arg);
                    try {
                        slots = Integer.parseInt(raw);
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("--slots must be an integer: " + raw);
                    }
                    if (slots < 1) {
                        throw new IllegalArgumentException("--slots must be >= 1: " + raw);
                    }
                    break;
                case "--no-stdin-exit":
                    exitOnStdinEof = false;
                    break;
                default:
                    throw new IllegalArgumentException("Unknown argument: " + arg);
            }
        }
        if (uploadDir == null) {
            throw new IllegalArgumentException("--upload-dir is required");
        }
        return new LauncherOptions(
                uploadDir.toAbsolutePath().normalize(),
                Optional.ofNullable(configFile).map(p -> p.toAbsolutePath().normalize()),
                slots,
                exitOnStdinEof);
    }

    private static String value(String[] args, int index, String option) {
        if (index >= args.length || args[index].isEmpty()) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[index];
    }
}
