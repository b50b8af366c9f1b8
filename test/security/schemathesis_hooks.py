"""schemathesis hooks for test/security/schemathesis.test.ts (loaded through SCHEMATHESIS_HOOKS).

openapi.yaml declares the upload's file part as application/java-archive, which schemathesis has no
serializer for: send the generated value as the part's raw bytes.
"""
import schemathesis


@schemathesis.serializer("application/java-archive", "application/x-java-archive")
def java_archive(ctx, value):
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")
