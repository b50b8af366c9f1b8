/**
 * The codes a failed start-up prints (`flink-jar-gateway: <CODE>: <message>` on stderr) and the exit
 * code that goes with each. Not HTTP errors: no response carries them, so they are not in
 * `ERROR_CODES` nor in openapi.yaml; docs/errors.md lists both registries. Exit 2 means "the
 * configuration is wrong; fix it and start again" — a value, a rule across options, a file an option
 * names; exit 1 means the configuration was fine and something at run time failed.
 */
export interface StartupSpec {
  exit: 1 | 2;
  meaning: string;
}

export const STARTUP_CODES = {
  GW_CONFIG_INVALID: {
    exit: 2,
    meaning:
      "The configuration is invalid; one line per problem names the key, where its value came from and what to do. Covers bad values and command-line arguments, rules across options (a key pair set by half, a mode that needs another option, jar URIs on a public address without authentication), and files or directories options name that cannot be used (TLS material, CA bundles, the tokens file, allowed directories, state directories that are not the gateway's own).",
  },
  GW_PLUGIN_LOAD_FAILED: {
    exit: 2,
    meaning:
      'A third-party filesystem plugin under gateway.plugins.dir cannot be loaded (manifest, entry, contract version, a clash with another plugin).',
  },
  GW_EMBEDDED_UNAVAILABLE: {
    exit: 1,
    meaning:
      'The embedded Flink cluster (no gateway.cluster.rest-url) cannot start: Java 17+ or Maven missing, or the cluster did not come up in time.',
  },
  GW_TOKENS_STARTUP: {
    exit: 1,
    meaning: 'A delegation-token provider or receiver failed to initialise for a reason other than its options.',
  },
  GW_HA_STORE_FORBIDDEN: {
    exit: 2,
    meaning:
      "The gateway's Kubernetes identity (the JobManager pod's service account, or the kubeconfig the cluster's Flink configuration names) lacks a ConfigMap verb it needs in the cluster's namespace (gateway.ha.store kubernetes); the message names the missing verbs and the Role rule that grants them.",
  },
  GW_LISTEN_FAILED: {
    exit: 1,
    meaning: 'The gateway cannot listen on rest.bind-address:rest.port (the port is taken, the address is not local).',
  },
  GW_STARTUP_FAILED: {
    exit: 1,
    meaning:
      'Anything else that stops start-up (a state directory that cannot be created, the JobManager client cannot be built); the log has the details.',
  },
} as const satisfies Record<string, StartupSpec>;

export type StartupCode = keyof typeof STARTUP_CODES;
