package dev.flinkjargateway.testudf;

/**
 * A "UDF library" packaged alone as {@code target/test-jars/ShoutUdf.jar}: {@code UdfJob} needs it
 * on the job's classpath, which only {@code user.artifacts.artifact-list} puts there.
 */
public final class Shout {
    private Shout() {}

    public static String shout(String s) {
        return s.toUpperCase() + "!";
    }
}
