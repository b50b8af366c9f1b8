import { readFileSync } from 'node:fs';
import type { ConfigRule, Configuration, OptionDef } from '../../src/plugin-kit';

const section = 'Google Cloud Storage (gs://)';

/**
 * The settings of the gs:// plugin, each under Hadoop's GCS connector name (`fs.gs.*`) and Flink's
 * mirror of it (`gs.*`: Flink hands a `gs.` key to the connector as `fs.gs.`); the key-file setting
 * also under the connector 2.x name Flink's documentation uses
 * (`google.cloud.auth.service.account.json.keyfile`). Every name of one setting means the same;
 * two names set to different values stop start-up.
 */
const SETTINGS = {
  authType: {
    names: ['fs.gs.auth.type', 'gs.auth.type'],
    type: 'string',
    description:
      'How the gateway authenticates to Cloud Storage, as the GCS connector names it: APPLICATION_DEFAULT (Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, ' +
      'then the metadata server, which is how GKE Workload Identity works), SERVICE_ACCOUNT_JSON_KEYFILE (the key file below), COMPUTE_ENGINE (the metadata server) ' +
      'or UNAUTHENTICATED (public objects). Unset: the key file when one is set, else APPLICATION_DEFAULT. USER_CREDENTIALS, ACCESS_TOKEN_PROVIDER (a Java class) and ' +
      'WORKLOAD_IDENTITY_FEDERATION_CREDENTIAL_CONFIG_FILE stop start-up (an external-account file named by GOOGLE_APPLICATION_CREDENTIALS works through APPLICATION_DEFAULT).',
  },
  keyFile: {
    names: [
      'fs.gs.auth.service.account.json.keyfile',
      'gs.auth.service.account.json.keyfile',
      'google.cloud.auth.service.account.json.keyfile',
    ],
    type: 'string',
    description:
      "Path of a service-account JSON key file. Its private key signs a token request sent only to the token endpoint (fs.gs.token.server.url, else the file's token_uri, " +
      'else https://oauth2.googleapis.com/token); the access token goes only to the storage root URL. Checked at start-up (readable, a service_account key).',
  },
  projectId: {
    names: ['fs.gs.project.id', 'gs.project.id'],
    type: 'string',
    description: 'Google Cloud project id. A read does not need one; set, it spares Application Default Credentials a project lookup.',
  },
  rootUrl: {
    names: ['fs.gs.storage.root.url', 'gs.storage.root.url'],
    type: 'url',
    description:
      'Root URL of the Cloud Storage JSON API, default https://storage.googleapis.com/. Set it for an emulator or a Private Service Connect endpoint, and list its host:port ' +
      'in gateway.artifacts.restricted-hosts.allowed when it is a private address. Credentials are sent only over https.',
  },
  tokenServerUrl: {
    names: ['fs.gs.token.server.url', 'gs.token.server.url'],
    type: 'url',
    description:
      "Token endpoint for a service-account key, default the key file's token_uri, else https://oauth2.googleapis.com/token. https only; it passes the restricted-host guard like the store.",
  },
} as const;

export type GcsSetting = keyof typeof SETTINGS;

export const gcsOptions: readonly OptionDef[] = Object.values(SETTINGS).flatMap((s) =>
  s.names.map(
    (key, i): OptionDef => ({
      key,
      type: s.type,
      section,
      ...(s.type === 'url' && s === SETTINGS.tokenServerUrl ? { protocols: ['https:'] } : {}),
      description:
        i === 0
          ? s.description
          : `Another name of ${s.names[0]} (${i === 1 ? "Flink's gs. mirror of the connector key" : 'the GCS connector 2.x name'}).`,
    }),
  ),
);

/** Every key the plugin declares (a gs key outside this set is a start-up warning). */
export const gcsKeys: ReadonlySet<string> = new Set(gcsOptions.map((o) => o.key));

/** The value of one setting under whichever of its names is set, with that name. */
export function setting(config: Configuration, name: GcsSetting): { key: string; value: string } | undefined {
  for (const key of SETTINGS[name].names) {
    const v = config.value(key);
    if (typeof v === 'string' && v.trim() !== '') return { key, value: v.trim() };
  }
  return undefined;
}

export const AUTH_TYPES = ['APPLICATION_DEFAULT', 'SERVICE_ACCOUNT_JSON_KEYFILE', 'COMPUTE_ENGINE', 'UNAUTHENTICATED'] as const;
export type GcsAuthType = (typeof AUTH_TYPES)[number];

/** The auth type in force: the configured one, else the key file when one is set, else ADC. */
export function authType(config: Configuration): GcsAuthType {
  const t = setting(config, 'authType')?.value.toUpperCase();
  if (t !== undefined) return t as GcsAuthType; // checked at start-up
  return setting(config, 'keyFile') !== undefined ? 'SERVICE_ACCOUNT_JSON_KEYFILE' : 'APPLICATION_DEFAULT';
}

/** The fields of a service-account key file the plugin reads (the SDK reads the rest). */
export interface ServiceAccountKey {
  type: 'service_account';
  client_email: string;
  private_key: string;
  token_uri?: string;
  [field: string]: unknown;
}

/** Reads and checks a service-account key file; throws a message naming what is wrong (never its content). */
export function readCredentialsFile(path: string): ServiceAccountKey {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(`${path} ${code !== undefined ? `cannot be read (${code})` : 'is not JSON'}`);
  }
  const o = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  if (o.type !== 'service_account')
    throw new Error(`${path} is not a service-account key file (its "type" is ${JSON.stringify(o.type ?? null)})`);
  if (typeof o.client_email !== 'string' || typeof o.private_key !== 'string') {
    throw new Error(`${path} has no client_email or private_key`);
  }
  if (o.token_uri !== undefined && (typeof o.token_uri !== 'string' || !/^https:\/\//.test(o.token_uri)))
    throw new Error(`${path} has a token_uri that is not an https URL`);
  return o as ServiceAccountKey;
}

/** Start-up checks: one value per setting, an auth type the gateway can act on, and its file. */
export const gcsRules: readonly ConfigRule[] = [
  {
    keys: gcsOptions.map((o) => o.key),
    description:
      'the fs.gs.* and gs.* names of one GCS setting agree; fs.gs.auth.type is one the gateway can act on, with the file it needs.',
    check(config) {
      const out: { key: string; message: string }[] = [];
      for (const s of Object.values(SETTINGS)) {
        const set = s.names
          .map((key) => ({ key, value: config.value(key) }))
          .filter((e) => typeof e.value === 'string' && e.value.trim() !== '');
        const first = set[0];
        for (const e of set.slice(1))
          if (first !== undefined && String(e.value).trim() !== String(first.value).trim())
            out.push({ key: e.key, message: `disagrees with ${first.key}, another name of the same GCS setting; set one` });
      }
      const type = setting(config, 'authType');
      if (type !== undefined && !(AUTH_TYPES as readonly string[]).includes(type.value.toUpperCase())) {
        const why = /^(USER_CREDENTIALS|ACCESS_TOKEN_PROVIDER|WORKLOAD_IDENTITY_FEDERATION_CREDENTIAL_CONFIG_FILE)$/i.test(type.value)
          ? 'is not supported by the gateway (user refresh tokens, Java access-token provider classes and federation config keys have no counterpart; for federation point GOOGLE_APPLICATION_CREDENTIALS at the file and use APPLICATION_DEFAULT)'
          : 'is not a GCS connector auth type';
        out.push({ key: type.key, message: `'${type.value}' ${why}; use ${AUTH_TYPES.join(', ')}` });
        return out;
      }
      const kind = authType(config);
      if (kind === 'SERVICE_ACCOUNT_JSON_KEYFILE' && setting(config, 'keyFile') === undefined) {
        out.push({
          key: type?.key ?? SETTINGS.authType.names[0],
          message: `SERVICE_ACCOUNT_JSON_KEYFILE needs ${SETTINGS.keyFile.names[0]}`,
        });
      }
      return out;
    },
  },
  {
    keys: [...SETTINGS.keyFile.names],
    description: 'the service-account key file the auth type uses is readable JSON of its kind.',
    reads: 'files',
    check(config) {
      const file = authType(config) === 'SERVICE_ACCOUNT_JSON_KEYFILE' ? setting(config, 'keyFile') : undefined;
      if (file === undefined) return [];
      try {
        readCredentialsFile(file.value);
        return [];
      } catch (err) {
        return [{ key: file.key, message: (err as Error).message }];
      }
    },
  },
];

/** Start-up warnings: a gs key the gateway recognises as the GCS connector's (or Flink's) but does not act on. */
export const gcsWarnings: readonly ConfigRule[] = [
  {
    keys: [],
    severity: 'warning',
    description:
      'a Google Cloud Storage key (gs.*, fs.gs.*, google.cloud.*) the gateway does not act on: writer and sink settings, proxies, requester pays, customer-supplied encryption, ' +
      "impersonation, timeouts and retries (the gateway's own user.artifacts.* limits apply).",
    check(config) {
      const out: { key: string; message: string }[] = [];
      for (const key of config.keys()) {
        if (gcsKeys.has(key) || !/^(?:gs|fs\.gs|google\.cloud)\./.test(key)) continue;
        out.push({ key, message: "recognised Google Cloud Storage key, not supported by the gateway's gs:// fetch and ignored" });
      }
      return out;
    },
  },
];
