import { option, type OptionDef, type OptionValueMap } from './types';

/** A permission list's entries: `token:<name>`, `cert:<subject CN>` or `*`; one message per bad entry. */
function principalEntries(entries: readonly string[]): string[] {
  return entries
    .filter((e) => e !== '*' && !/^(token|cert):.+$/.test(e))
    .map((e) => `'${e}' is not a principal (use token:<name>, cert:<subject CN> or *)`);
}

/**
 * The gateway's own options. Plugins declare theirs next to their code and the composition root
 * merges them into one registry (see `OptionsRegistry`). Keys follow Flink's names wherever Flink
 * has one, so one YAML file can serve both the JobManager and the gateway.
 */
export const coreOptions = {
  restBindAddress: option({
    key: 'rest.bind-address',
    type: 'string',
    default: '127.0.0.1',
    section: 'Listening',
    description:
      "Address the gateway listens on (Flink's key). Binding a non-loopback address exposes the gateway; see the security notes.",
  }),
  restPort: option({
    key: 'rest.port',
    type: 'int',
    default: 8081,
    min: 0,
    max: 65535,
    section: 'Listening',
    description: "Port the gateway listens on (Flink's key). 0 picks a free port; the chosen port is logged.",
  }),
  httpHeadersTimeout: option({
    key: 'gateway.http.headers-timeout',
    type: 'duration',
    default: 20_000,
    min: 1,
    section: 'Listening',
    description:
      "How long a client may take to send a request's headers; the connection is closed after that (a slow-headers client holds no socket for longer).",
  }),
  httpRequestTimeout: option({
    key: 'gateway.http.request-timeout',
    type: 'duration',
    default: 600_000,
    min: 1,
    section: 'Listening',
    description:
      'How long a client may take to send a whole request, body included (the largest jar upload on the slowest link you support); then 408 and the connection is closed.',
  }),
  httpMaxAnonymousRequests: option({
    key: 'gateway.http.max-anonymous-requests',
    type: 'int',
    default: 16,
    min: 1,
    section: 'Listening',
    description:
      'With authentication on: how many requests without credentials (the open probe routes, GET /config) may be in progress at once; more get 503 with Retry-After. Authenticated callers are not counted, so an unauthenticated flood cannot take their JobManager connections.',
  }),
  clusterRestUrl: option({
    key: 'gateway.cluster.rest-url',
    type: 'url',
    section: 'Cluster',
    description:
      'REST URL of an existing JobManager to front, e.g. http://127.0.0.1:8082. When unset, the gateway launches the embedded Flink session cluster (needs Java 17 and Maven).',
  }),
  clusterFlinkConf: option({
    key: 'gateway.cluster.flink-conf',
    type: 'string',
    section: 'Cluster',
    description:
      "The cluster's own Flink configuration: its config.yaml (Flink 2.x, or 1.19+), its legacy flink-conf.yaml, or the conf directory holding one (the JobManager's ConfigMap mounted into the sidecar). Its keys are read below the gateway's own file, so credentials (s3.*, fs.azure.*) and web.submit.jar-uri.enable are written once; the gate is still never taken from a request. The JobManager's rest.port, rest.bind-address and web.upload.dir are not taken (the gateway keeps its own). Token providers see it as the cluster configuration of every job, secrets removed. Trade-off: every job's code can read the cluster's Flink configuration, and so any credential written there (docs/security.md). Re-read when gateway.secrets.dir changes.",
  }),
  clusterRequestTimeout: option({
    key: 'gateway.cluster.request-timeout',
    type: 'duration',
    default: 60_000,
    min: 1,
    section: 'Cluster',
    description:
      "Timeout of each gateway-originated JobManager call other than run/plan and jar uploads (delete, list, job status, cancel, the start-up probes). A jar upload to the JobManager is not bounded by it: it takes as long as the jar needs, and a stalled one is cut by the connection's inactivity timeout (a client's own upload also by gateway.http.request-timeout).",
  }),
  clusterRunTimeout: option({
    key: 'gateway.cluster.run-timeout',
    type: 'duration',
    default: 600_000,
    min: 1,
    section: 'Cluster',
    description: "How long a run or plan may take on the JobManager (Flink's web.timeout default, and the operator's submission timeout).",
  }),
  jobManagerUploadDir: option({
    key: 'web.upload.dir',
    type: 'string',
    section: 'Cluster',
    description:
      "The JobManager's web.upload.dir as seen by the gateway (jars live in <dir>/flink-web-upload). For the embedded cluster, defaults to a fresh temporary directory that is removed on exit.",
  }),
  embeddedJava: option({
    key: 'gateway.embedded.java',
    type: 'string',
    section: 'Embedded cluster',
    description: 'Java executable for the embedded cluster. Default: $JAVA_HOME/bin/java, else java on PATH.',
  }),
  embeddedJvmOpts: option({
    key: 'gateway.embedded.jvm-options',
    type: 'string',
    default: '-Xmx768m -XX:+UseSerialGC -XX:TieredStopAtLevel=1',
    section: 'Embedded cluster',
    description:
      'JVM options of the embedded cluster (space-separated); for a distribution cluster they are added to env.java.opts.all without -Xms/-Xmx (Flink sizes its JVMs itself). Never put secrets here: they are visible in the process list.',
  }),
  embeddedSlots: option({
    key: 'gateway.embedded.slots',
    type: 'int',
    default: 4,
    min: 1,
    section: 'Embedded cluster',
    description: "Task slots of the embedded cluster's single TaskManager.",
  }),
  embeddedStartupTimeout: option({
    key: 'gateway.embedded.startup-timeout',
    type: 'duration',
    default: 180_000,
    min: 1,
    section: 'Embedded cluster',
    description: 'How long to wait for the embedded cluster (including a first-time Maven build) before giving up.',
  }),
  clusterFlinkVersion: option({
    key: 'gateway.cluster.flink-version',
    type: 'string',
    section: 'Cluster',
    description:
      "The fronted JobManager's Flink version (e.g. 2.3.0), where the gateway must answer as that version would (POST /jars/:jarid/run-application exists from 2.3). Default: learnt from the JobManager's GET /v1/config (flink-version) on first need.",
  }),
  embeddedFlinkVersion: option({
    key: 'gateway.embedded.flink-version',
    type: 'string',
    section: 'Embedded cluster',
    description:
      "Launch Flink's own distribution of this version (1.20.5, 2.0.2, 2.1.3, 2.2.1, 2.3.0, ...) instead of the one-JVM embedded cluster: downloaded once from PyPI (apache-flink, apache-flink-libraries; needs python3 with pip) into gateway.embedded.cache-dir, then one JobManager and gateway.embedded.task-managers TaskManagers started by Flink's own scripts, loopback only. Only when gateway.cluster.rest-url is unset.",
  }),
  embeddedFlinkHome: option({
    key: 'gateway.embedded.flink-home',
    type: 'string',
    section: 'Embedded cluster',
    description:
      'Launch the Flink distribution in this directory (your own: bin/, conf/, lib/ with flink-dist) as the session cluster, like gateway.embedded.flink-version but without a download. The directory is only read; configuration, logs and uploads go to a private temporary directory.',
  }),
  embeddedTaskManagers: option({
    key: 'gateway.embedded.task-managers',
    type: 'int',
    default: 1,
    min: 1,
    max: 16,
    section: 'Embedded cluster',
    description:
      'TaskManager processes of a distribution cluster (gateway.embedded.flink-version / flink-home); each has gateway.embedded.slots slots.',
  }),
  embeddedCacheDir: option({
    key: 'gateway.embedded.cache-dir',
    type: 'string',
    section: 'Embedded cluster',
    description:
      'Where assembled Flink distributions are kept (flink-<version>/, about 300 MB each; reused by every later start). Default: $XDG_CACHE_HOME/flink-jar-gateway, else ~/.cache/flink-jar-gateway.',
  }),
  authTokensFile: option({
    key: 'gateway.auth.tokens-file',
    type: 'string',
    section: 'Security',
    description:
      'File of "<principal> <sha256-hex of the token>" lines; requests must send "Authorization: Bearer <token>". Tokens are stored hashed; the file is re-read when it changes. Health, readiness and GET /config stay open.',
  }),
  permissionRead: option({
    key: 'gateway.auth.permission.read',
    type: 'list',
    default: ['*'],
    section: 'Security',
    check: principalEntries,
    description:
      'Principals that may read: every GET/HEAD (job and cluster state, the Web UI, jar lists, gateway status), except the GET routes that act (plan, yarn-cancel); logs and other diagnostics also need gateway.auth.permission.logs, and configuration listings come with every secret hidden (the gateway\'s sensitive options and Flink\'s list). Entries "token:<name>" (a gateway.auth.tokens-file line), "cert:<subject CN>" or "*" (every authenticated caller), separated by ";".',
  }),
  permissionSubmit: option({
    key: 'gateway.auth.permission.submit',
    type: 'list',
    default: ['*'],
    section: 'Security',
    check: principalEntries,
    description:
      'Principals that may submit: upload, fetch, plan, run and delete jars, and POST /v1/jobs. Same entry syntax as gateway.auth.permission.read.',
  }),
  permissionCancel: option({
    key: 'gateway.auth.permission.cancel',
    type: 'list',
    default: ['*'],
    section: 'Security',
    check: principalEntries,
    description:
      'Principals that may control running jobs and the cluster: cancel, stop (with savepoint), trigger savepoints and checkpoints, rescale, and every other call that changes state (including DELETE /cluster). Same entry syntax as gateway.auth.permission.read.',
  }),
  permissionLogs: option({
    key: 'gateway.auth.permission.logs',
    type: 'list',
    default: [],
    section: 'Security',
    check: principalEntries,
    description:
      "Principals that may read what the gateway cannot filter: the JobManager's and TaskManagers' logs, log lists, log files and stdout, thread dumps, profiler runs and their results, and flame graphs (each needs this on top of the permission its method needs: read for GET). Logs print the cluster's whole start-up configuration, redacted only by Flink's own word list, and every job's output, so a plain read principal (a dashboard token) does not get them. Default: nobody. Without authentication every caller is anonymous and may read them, like everything else. Same entry syntax as gateway.auth.permission.read.",
  }),
  policyMode: option({
    key: 'gateway.policy.mode',
    type: 'enum',
    default: 'open',
    values: ['open', 'fetched-only'],
    section: 'Security',
    description:
      '"open": uploaded jars and POST /v1/jobs (flink run) work as on Flink. "fetched-only": the cluster runs only jars that passed the URI policy — runs and plans must name user.artifacts.job-jar or a jar id registered by POST /jars/fetch; POST /v1/jobs is refused. Uploads are accepted only as placeholders (the operator uploads one before a run by URI): see gateway.policy.fetched-only.max-upload-size.',
  }),
  auditLog: option({
    key: 'gateway.audit.log',
    type: 'string',
    default: 'stdout',
    section: 'Logging',
    description:
      'Where the audit log goes: one JSON line per submission and per fetch (principal, redacted URI, version/ETag, SHA-256, size, job id, policy verdicts, outcome, duration) and per job-control call (cancel, stop, savepoint, rescale: principal, path, job id, status). "stdout", "none", or a file path (appended to, created with mode 0600).',
  }),
  tlsCert: option({
    key: 'gateway.tls.cert',
    type: 'string',
    section: 'Security',
    description: "PEM certificate (chain) of the gateway's HTTPS listener. With gateway.tls.key.",
  }),
  tlsKey: option({
    key: 'gateway.tls.key',
    type: 'string',
    section: 'Security',
    description: 'PEM private key file of the HTTPS listener.',
  }),
  tlsKeystore: option({
    key: 'gateway.tls.keystore',
    type: 'string',
    section: 'Security',
    description:
      'PKCS12 keystore (.p12) for the HTTPS listener, instead of gateway.tls.cert/key (Node cannot read JKS; convert with keytool -importkeystore -deststoretype PKCS12).',
  }),
  tlsKeystorePassword: option({
    key: 'gateway.tls.keystore-password',
    type: 'string',
    sensitive: true,
    section: 'Security',
    description: 'Password of gateway.tls.keystore.',
  }),
  tlsClientCa: option({
    key: 'gateway.tls.client-ca',
    type: 'string',
    section: 'Security',
    description:
      "PEM CA bundle for mutual TLS: client certificates it signed are accepted and their subject CN becomes the principal (e.g. the operator's own certificate).",
  }),
  clusterCa: option({
    key: 'gateway.cluster.ca',
    type: 'string',
    section: 'Cluster',
    description: 'PEM CA bundle trusted for an https gateway.cluster.rest-url (a JobManager with REST SSL).',
  }),
  clusterCert: option({
    key: 'gateway.cluster.cert',
    type: 'string',
    section: 'Cluster',
    description:
      'PEM client certificate (chain) the gateway presents to a JobManager whose REST endpoint requires client certificates (security.ssl.rest.authentication-enabled: true). With gateway.cluster.key.',
  }),
  clusterKey: option({
    key: 'gateway.cluster.key',
    type: 'string',
    section: 'Cluster',
    description: 'PEM private key file of gateway.cluster.cert.',
  }),
  secretsDir: option({
    key: 'gateway.secrets.dir',
    type: 'string',
    section: 'Credentials',
    description:
      'Directory of files named after option keys whose content is the value (a mounted Kubernetes Secret), e.g. s3.secret-key. Read at start and polled; rotated credentials are used by the next fetch without a restart. Precedence: above the YAML file, below environment and -D.',
  }),
  secretsPollInterval: option({
    key: 'gateway.secrets.poll-interval',
    type: 'duration',
    default: 10_000,
    min: 100,
    section: 'Credentials',
    description: 'How often gateway.secrets.dir is checked for changed files.',
  }),
  pluginsDir: option({
    key: 'gateway.plugins.dir',
    type: 'string',
    section: 'Remote jars',
    description:
      'Directory of third-party filesystem plugins: each sub-folder holds a manifest.json ({"name","schemes","entry","contractVersion"}). A plugin that fails to load stops start-up.',
  }),
  drainTimeout: option({
    key: 'gateway.drain-timeout',
    type: 'duration',
    default: 25_000,
    min: 0,
    section: 'Listening',
    description:
      "On SIGTERM: how long requests in flight (uploads, fetches, runs) may take before the remaining connections are cut. Keep it below the pod's terminationGracePeriodSeconds.",
  }),
  maxJsonBody: option({
    key: 'gateway.http.max-json-body',
    type: 'memory',
    default: 4 * 1024 ** 2,
    min: 1024,
    section: 'Jars',
    description:
      "Largest JSON body of a run, plan or fetch request (the operator sends the cluster's whole configuration, typically tens of kB). Larger ones get 413 before they are read; at most 16 such bodies are held at once (then 503 with Retry-After), so memory stays bounded however many arrive.",
  }),
  uploadMaxSize: option({
    key: 'gateway.upload.max-size',
    type: 'memory',
    default: 1024 ** 3,
    min: 1,
    section: 'Jars',
    description: 'Largest jar accepted by POST /jars/upload. Larger uploads are refused with 413 and nothing is kept on the JobManager.',
  }),
  jarsMaxCountPerPrincipal: option({
    key: 'gateway.jars.max-count-per-principal',
    type: 'int',
    default: 256,
    min: 1,
    section: 'Jars',
    description:
      'Most jars one principal may keep on the JobManager through the gateway: uploads (POST /jars/upload) and POST /jars/fetch results, until deleted. Reserved when a request is accepted, before its body or fetch, and given back when it fails, when the jar is deleted, or when the JobManager no longer lists it. Over it: 429 GW_JAR_QUOTA.',
  }),
  jarsMaxSizePerPrincipal: option({
    key: 'gateway.jars.max-size-per-principal',
    type: 'memory',
    default: 4 * 1024 ** 3,
    min: 1,
    section: 'Jars',
    description:
      'Most bytes of jars one principal may keep on the JobManager through the gateway (the jars counted by gateway.jars.max-count-per-principal). An upload is charged as its bytes arrive, a fetch its size before the JobManager gets it. Over it: 429 GW_JAR_QUOTA, and nothing of that jar is kept.',
  }),
  jarsMaxTotalSize: option({
    key: 'gateway.jars.max-total-size',
    type: 'memory',
    default: 16 * 1024 ** 3,
    min: 1,
    section: 'Jars',
    description:
      "Most bytes of jars the gateway puts in the JobManager's upload directory, all principals together: kept jars plus the transient jars of runs by URI while they run. Over it: 429 GW_JAR_CEILING. Keep it below the free space of web.upload.dir's volume.",
  }),
  fetchedOnlyMaxUploadSize: option({
    key: 'gateway.policy.fetched-only.max-upload-size',
    type: 'memory',
    default: 64 * 1024,
    min: 1,
    section: 'Security',
    description:
      'With gateway.policy.mode: fetched-only an uploaded jar never runs, so uploads are accepted only as placeholders (the Flink Kubernetes Operator uploads an empty jar before a run by URI): at most this many bytes and without class files, else 403 GW_POLICY_FETCHED_ONLY.',
  }),
  runDedupeRetention: option({
    key: 'gateway.run.dedupe-retention',
    type: 'duration',
    default: 3_600_000,
    min: 0,
    section: 'Jars',
    description:
      "How long an accepted run is remembered by jobId, so that a retried POST /jars/:jarid/run (the operator's client retries) returns the first result instead of starting a second job. The memory answers only while the JobManager still knows the job (GET /v1/jobs/:jobid); a job it lost (a restart without HA) is run again, and Flink decides whether the id is free.",
  }),
  jarUriEnable: option({
    key: 'web.submit.jar-uri.enable',
    type: 'boolean',
    default: false,
    section: 'Remote jars',
    description:
      "Accept user.artifacts.job-jar (a jar URI) in a run request's flinkConfiguration. Read only from the gateway's own configuration, never from a request.",
  }),
  logLevel: option({
    key: 'gateway.log.level',
    type: 'enum',
    default: 'info',
    values: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
    section: 'Logging',
    description: "Log level of the gateway's JSON logs (pino).",
  }),
} satisfies Record<string, OptionDef>;

export type CoreOptions = typeof coreOptions;
export type ValueOf<D> = D extends OptionDef<infer T> ? OptionValueMap[T] : never;
