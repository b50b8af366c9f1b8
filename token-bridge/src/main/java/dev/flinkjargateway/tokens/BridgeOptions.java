package dev.flinkjargateway.tokens;

import java.time.Duration;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;

/**
 * Options of the {@code gateway} delegation-token provider, under
 * {@code security.delegation.token.provider.gateway.*} (Flink's per-provider prefix). The bridge
 * secret itself never appears in Flink's configuration or on a command line: only the path of the
 * file that holds it.
 */
public final class BridgeOptions {

    /** Prefix of every option: {@code DelegationTokenProvider.CONFIG_PREFIX + ".gateway."}. */
    public static final String PREFIX =
            "security.delegation.token.provider." + GatewayDelegationTokenProvider.SERVICE_NAME + ".";

    public static final ConfigOption<String> URL =
            ConfigOptions.key(PREFIX + "url")
                    .stringType()
                    .defaultValue("http://127.0.0.1:8081")
                    .withDescription(
                            "Base URL of the flink-jar-gateway next to this JobManager. Plain http only to a"
                                    + " loopback address (the gateway serves its bridge endpoint to loopback"
                                    + " clients only).");

    public static final ConfigOption<String> URL_FILE =
            ConfigOptions.key(PREFIX + "url-file")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "A file holding the gateway's base URL, re-read on every poll; wins over url when"
                                    + " it exists and is not empty. For gateways whose port is only known once"
                                    + " they listen (an ephemeral port). A missing file means: no gateway yet.");

    public static final ConfigOption<String> SECRET_FILE =
            ConfigOptions.key(PREFIX + "secret-file")
                    .stringType()
                    .noDefaultValue()
                    .withDescription(
                            "A file holding the bridge secret (the gateway's"
                                    + " gateway.tokens.bridge-secret-file), re-read on every poll. Unset: the"
                                    + " provider stays inactive.");

    public static final ConfigOption<Duration> POLL_INTERVAL =
            ConfigOptions.key(PREFIX + "poll-interval")
                    .durationType()
                    .defaultValue(Duration.ofSeconds(10))
                    .withDescription(
                            "How often the gateway's tokens are pulled (and redistributed to every"
                                    + " TaskManager) while the gateway has something to deliver soon (a job"
                                    + " waiting for its first tokens, a renewal due), and while the gateway"
                                    + " cannot be reached.");

    public static final ConfigOption<Duration> IDLE_INTERVAL =
            ConfigOptions.key(PREFIX + "idle-interval")
                    .durationType()
                    .defaultValue(Duration.ofMinutes(1))
                    .withDescription(
                            "Longest time between two pulls while the gateway has nothing to deliver"
                                    + " soon. Flink's token manager runs every enabled provider in one cycle,"
                                    + " so each pull also re-obtains the tokens of every other provider"
                                    + " (Kerberos/Hadoop, HBase, S3, ...); and it is the longest a job that"
                                    + " has just been registered at the gateway waits for its first tokens."
                                    + " Raise it toward the tokens' own renewal time to call the other"
                                    + " providers less often.");

    public static final ConfigOption<Duration> REQUEST_TIMEOUT =
            ConfigOptions.key(PREFIX + "request-timeout")
                    .durationType()
                    .defaultValue(Duration.ofSeconds(5))
                    .withDescription(
                            "Connect and read timeout of one pull. The first pull runs on the"
                                    + " ResourceManager's main thread, so keep it short.");

    private BridgeOptions() {}
}
