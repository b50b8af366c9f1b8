/**
 * The one registry of gateway error codes. A code is never reused for another meaning; retire a
 * code by leaving it here with `retired: true` (docs/errors.md still lists it). Messages are
 * templates: `{name}` is replaced by a parameter. They say what failed, why, and what to do.
 */
export interface ErrorSpec {
  status: number;
  template: string;
  retired?: boolean;
}

export const ERROR_CODES = {
  GW_ROUTE_NOT_FOUND: { status: 404, template: 'Not found: {uri}' },
  GW_ROUTE_NONCANONICAL: {
    status: 400,
    template:
      'The path {path} is percent-encoded in a way that changes its meaning on a jar route; send the plain path (for example /v1/jars/<jarid>/run).',
  },
  GW_ROUTE_AMBIGUOUS: {
    status: 400,
    template:
      'The path {path} contains {reason}, so Flink could route it differently from what the gateway checks; send the plain path without encoded ?, # or control characters.',
  },
  // Retired: it answered Flink 2.3's run-application, the one route the gateway refused; that route is served now.
  GW_ROUTE_UNSUPPORTED: { status: 400, template: '{route} is not supported by this gateway yet; {hint}', retired: true },
  GW_REQUEST_MALFORMED: { status: 400, template: 'Request did not match expected format {type}: {reason}' },
  GW_REQUEST_TOO_LARGE: { status: 413, template: 'The request body is larger than {limit} bytes.' },
  GW_JAR_ID_INVALID: {
    status: 400,
    template: "Jar id '{jarId}' is not a bare file name; use the id returned by POST /jars/upload (the last '/' segment of 'filename').",
  },
  GW_JAR_URI_CONFLICT: {
    status: 400,
    template:
      "The jar {jarId} in the path holds classes, and the request also names user.artifacts.job-jar ({uri}); the gateway replaces only a placeholder jar without classes (the operator's empty.jar). Run that jar without user.artifacts.job-jar, or run the URI with a placeholder.",
  },
  GW_JAR_NOT_FOUND: { status: 400, template: '{flinkMessage}; upload the jar first (POST /jars/upload) and use the id it returns.' },
  GW_JAR_INVALID: { status: 400, template: 'The JobManager could not load the jar: {flinkMessage}' },
  GW_RUN_JOB_ID_CONFLICT: {
    status: 409,
    template:
      "The job id {jobId} is already taken by another run (another principal, another request, or a job the JobManager already has); resend the identical request to get the first run's result, or choose a new jobId.",
  },
  GW_RUN_REJECTED: { status: 400, template: 'The JobManager rejected the job: {flinkMessage}' },
  GW_PLAN_REJECTED: { status: 400, template: 'The JobManager could not build the job plan: {flinkMessage}' },
  GW_UPLOAD_NOT_MULTIPART: {
    status: 400,
    template:
      'POST /jars/upload needs a multipart/form-data body with one .jar file, e.g. curl -X POST -H "Expect:" -F "jarfile=@app.jar" <gateway>/jars/upload',
  },
  GW_UPLOAD_FILE_COUNT: { status: 400, template: 'Exactly 1 file must be sent, received {count}.' },
  GW_UPLOAD_UNKNOWN_ATTRIBUTE: {
    status: 400,
    template: "Received unknown attribute {name}. Only the file and an optional 'request' field are allowed.",
  },
  GW_UPLOAD_NOT_JAR_NAME: { status: 400, template: "Only Jar files are allowed. The file name '{name}' must end with .jar." },
  GW_UPLOAD_NOT_ZIP: {
    status: 400,
    template:
      "The upload '{name}' is not a valid jar: {reason}. Nothing was kept on the JobManager; check that the file is a complete jar (unzip -t).",
  },
  GW_UPLOAD_TOO_LARGE: {
    status: 413,
    template:
      'The jar is larger than gateway.upload.max-size ({limit} bytes). Nothing was kept on the JobManager; raise the limit or use a smaller jar.',
  },
  GW_UPLOAD_INCOMPLETE: { status: 400, template: 'The upload ended before the multipart body was complete: {reason}' },
  GW_JAR_URI_DISABLED: {
    status: 400,
    template:
      "flinkConfiguration sets user.artifacts.job-jar, but this cluster does not accept jar URIs; set web.submit.jar-uri.enable: true in the gateway's configuration to allow remote jars, or upload the jar and remove the key.",
  },
  GW_JAR_URI_UNSUPPORTED: {
    status: 400,
    template: 'user.artifacts.job-jar is set but remote jar fetching is not available in this build: {reason}',
  },
  GW_FETCH_URI_INVALID: { status: 400, template: "'{uri}' is not a usable jar URI: {reason}" },
  GW_FETCH_SCHEME_UNSUPPORTED: {
    status: 400,
    template: "The scheme '{scheme}' of {uri} is not enabled on this cluster; enabled schemes: {schemes}. {hint}",
  },
  GW_FETCH_URI_NOT_ALLOWED: {
    status: 400,
    template:
      '{uri} is not allowed on this cluster: {reason}. gateway.artifacts.allowed-uris allows: {allowed}. Name a jar under one of them, or ask the cluster administrator to add an entry.',
  },
  GW_FETCH_RESTRICTED_HOST: {
    status: 400,
    template:
      '{uri} resolves to the restricted address {address}; list {hostPort} in gateway.artifacts.restricted-hosts.allowed if this cluster may fetch from it.',
  },
  GW_FETCH_NOT_FOUND: { status: 400, template: '{uri} does not exist ({detail}); check the bucket/container and the path.' },
  GW_FETCH_DENIED: {
    status: 400,
    template:
      "The cluster's credentials for {uri} were rejected ({detail}); check the {plugin} credentials in the gateway's configuration.",
  },
  GW_FETCH_TOO_LARGE: {
    status: 413,
    template: '{uri} is larger than user.artifacts.max-size ({limit} bytes); raise the limit or use a smaller jar.',
  },
  GW_FETCH_TIMEOUT: {
    status: 504,
    template: 'Fetching {uri} did not finish within user.artifacts.fetch-timeout ({timeoutMs} ms); check the store or raise the timeout.',
  },
  GW_FETCH_UNAVAILABLE: { status: 502, template: 'The store for {uri} is not reachable or failed ({detail}); retry later.' },
  GW_FETCH_CHANGED: {
    status: 502,
    template:
      '{uri} changed while it was being read ({detail}); nothing partial was kept. Run again to fetch the current version, or name an immutable version.',
  },
  GW_FETCH_DIGEST_MISMATCH: {
    status: 400,
    template: '{uri} has SHA-256 {actual}, not the expected {expected}; the object changed or the digest is wrong. Nothing was run.',
  },
  GW_FETCH_NOT_JAR: { status: 400, template: '{uri} is not a valid jar: {reason}. Nothing was run.' },
  GW_FETCH_DISK_FULL: {
    status: 507,
    template:
      'No space left in gateway.artifacts.cache-dir ({dir}) while fetching {uri}; nothing partial was kept. Free space, lower gateway.artifacts.cache.max-size, or give the cache a larger volume.',
  },
  GW_JAR_QUOTA: {
    status: 429,
    template:
      '{principal} may keep at most {limit} on the JobManager ({option}); this jar would make it {would}. Delete the jars it no longer needs (DELETE /jars/<jarid>; GET /jars lists them) and try again, or ask the gateway administrator to raise {option}.',
  },
  GW_JAR_CEILING: {
    status: 429,
    template:
      "The jars the gateway put in the JobManager's upload directory may take at most {limit} bytes ({option}); this jar would make it at least {would}. Delete jars that are no longer needed (DELETE /jars/<jarid>) and try again, or ask the gateway administrator to raise {option}.",
  },
  GW_FETCH_BUSY: {
    status: 503,
    template: 'Too many jar fetches are waiting (user.artifacts.max-concurrent-fetches = {limit}); retry shortly.',
  },
  GW_AUTH_REQUIRED: {
    status: 401,
    template:
      'This gateway requires authentication: send "Authorization: Bearer <token>" (a token listed in gateway.auth.tokens-file) or a client certificate trusted by gateway.tls.client-ca.',
  },
  GW_AUTH_JAR_OWNER: {
    status: 403,
    template:
      'The jar {jarId} was put on the JobManager by another principal, so {principal} may not {action} it; upload or fetch the jar yourself and use the id you get.',
  },
  GW_AUTH_CROSS_SITE: {
    status: 403,
    template:
      "A browser sent this state-changing request from another site ({reason}); jobs are submitted, cancelled and changed only from the gateway's own origin (its Web UI) or from non-browser clients.",
  },
  GW_AUTH_FORBIDDEN: {
    status: 403,
    template:
      '{principal} may not {action} on this gateway ({route}); gateway.auth.permission.{action} lists who may. Ask the gateway administrator to add this principal.',
  },
  GW_POLICY_ENTRY_CLASS: {
    status: 403,
    template:
      'This cluster runs only vetted jars (gateway.policy.mode: fetched-only), and a run must start a class of the fetched jar: {problem}. Set entryClass to a class the jar contains.',
  },
  GW_POLICY_FETCHED_ONLY: {
    status: 403,
    template:
      'This cluster runs only jars fetched by URI (gateway.policy.mode: fetched-only), so {what} is refused. Name the jar with user.artifacts.job-jar: <uri> in flinkConfiguration, or register it with POST /jars/fetch and run the returned jar id.',
  },
  GW_POLICY_UNREGISTERED_JOBS: {
    status: 403,
    template:
      "This cluster runs only jobs the gateway registered with its delegation-token providers before they started (gateway.tokens.unregistered-jobs: cancel), so {what} is refused: the gateway cannot read a job graph's configuration to register it. Submit the jar with POST /jars/upload and POST /jars/<jarid>/run, or ask the administrator for gateway.tokens.unregistered-jobs: register.",
  },
  GW_TOKENS_REJECTED: {
    status: 400,
    template: "The delegation-token provider '{provider}' refused the job: {reason}. The job was not started.",
  },
  GW_TOKENS_PROVIDER_FAILED: {
    status: 500,
    template:
      "The delegation-token provider '{provider}' failed unexpectedly while registering the job (an error that is not a refusal: a bug or a broken dependency of the provider). The job was not started; the provider is marked unhealthy in GET /gateway/v1/tokens and the gateway's log has the error. Retry later, and report it to the administrator.",
  },
  GW_TOKENS_JOB_CANCELLED: {
    status: 400,
    template:
      "The delegation-token provider '{provider}' refused the job {jobId}, registered with the cluster default scope (gateway.tokens.cluster-default-configuration) because it came as a job graph: {reason}. The JobManager had started it; the gateway cancelled it.",
  },
  GW_JOB_GRAPH_UNREADABLE: {
    status: 400,
    template:
      "The job graph of this POST /v1/jobs cannot be read, so its job cannot be registered with its own configuration for delegation tokens; nothing was started: {reason}. Submit it with Flink's own client (flink run, RestClusterClient) of Flink 1.20 to 2.3, or run the jar through POST /jars/:jarid/run.",
  },
  GW_TOKENS_BRIDGE_UNAUTHORIZED: {
    status: 401,
    template:
      'The token bridge needs "Authorization: Bearer <secret>" with the secret from the file gateway.tokens.bridge-secret-file names (the Flink side reads the same file through security.delegation.token.provider.gateway.secret-file).',
  },
  GW_TOKENS_BRIDGE_FORBIDDEN: {
    status: 403,
    template:
      "The token bridge answers loopback clients only, and this request came from {address}; run Flink's JobManager next to the gateway and point security.delegation.token.provider.gateway.url at http://127.0.0.1:<gateway port>.",
  },
  GW_GATEWAY_BUSY: { status: 503, template: 'Too many {what} are in progress ({limit}); retry shortly, or authenticate.' },
  GW_GATEWAY_DRAINING: {
    status: 503,
    template: 'The gateway is shutting down and takes no new work; retry against another instance or shortly.',
  },
  GW_CLUSTER_UNAVAILABLE: {
    status: 503,
    template: 'The JobManager at {target} is not reachable ({reason}). It may be starting or restarting; retry shortly.',
  },
  GW_CLUSTER_TLS: { status: 502, template: 'The TLS connection to the JobManager at {target} failed ({reason}): {hint}.' },
  GW_CLUSTER_BAD_RESPONSE: { status: 502, template: 'The JobManager at {target} sent an unusable response: {reason}' },
  GW_CLUSTER_TIMEOUT: { status: 504, template: 'The JobManager at {target} did not answer within {timeoutMs} ms ({operation}).' },
  GW_CLUSTER_SUBMIT_DISABLED: {
    status: 404,
    template:
      "The JobManager does not accept jars over REST (its configuration has web.submit.enable: false), so the {operation} call has no handler there. Set web.submit.enable: true on the cluster; the gateway's jar routes need it.",
  },
  GW_CLUSTER_NOT_READY: {
    status: 503,
    template:
      "The JobManager cannot take the {operation} call yet ({flinkMessage}); it is starting or electing a leader. Retry shortly: Flink's clients retry a 503 by themselves.",
  },
  GW_HA_STORE_UNAVAILABLE: {
    status: 503,
    template:
      "The gateways' shared store ({store}) cannot be reached, so the {operation} cannot be recorded where every replica sees it: {reason}. Retry shortly: Flink's clients retry a 503 by themselves.",
  },
  GW_CLUSTER_ERROR: { status: 502, template: 'The JobManager failed the {operation} call with HTTP {status}: {flinkMessage}' },
  GW_INTERNAL_ERROR: { status: 500, template: 'Internal gateway error (request id {requestId}); the details are in the gateway log.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;
