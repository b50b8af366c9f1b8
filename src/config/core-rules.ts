import { X509Certificate } from 'node:crypto';
import { lstatSync, readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { artifactOptions } from '../artifacts/options';
import { exposureProblem, parseTokensFile } from '../http/auth';
import { privateDirProblem } from '../private-dir';
import { tokenOptions } from '../tokens/token-options';
import { coreOptions as o } from './options';
import type { Configuration } from './registry';
import type { ConfigRule, OptionDef } from './types';

type Problem = { key: string; message: string };

/** Both options of a pair or neither (a certificate without its key cannot be used, and vice versa). */
function pair(a: OptionDef<'string'>, b: OptionDef<'string'>, what: string): ConfigRule {
  return {
    keys: [a.key, b.key],
    description: `set both or neither (${what}).`,
    check(config) {
      const hasA = config.getOptional(a) !== undefined;
      const hasB = config.getOptional(b) !== undefined;
      if (hasA === hasB) return [];
      const [set, missing] = hasA ? [a, b] : [b, a];
      return [{ key: missing.key, message: `${a.key} and ${b.key} go together: ${set.key} is set, so set ${missing.key} too (${what}), or remove ${set.key}` }];
    },
  };
}

/** Reads a file an option names; a problem naming the option when it cannot be read. */
function readOption(config: Configuration, def: OptionDef<'string'>, problems: Problem[]): Buffer | undefined {
  const path = config.getOptional(def);
  if (path === undefined) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    problems.push({ key: def.key, message: `cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); fix the path or the file's permissions` });
    return undefined;
  }
}

/** Loads PEM/PKCS12 material the way the listener and the JobManager client will, so a bad file fails start-up. */
function tlsMaterial(keys: OptionDef<'string'>[], load: (files: (Buffer | undefined)[], config: Configuration) => void, alsoReads: OptionDef[] = []): ConfigRule {
  return {
    keys: [...keys, ...alsoReads].map((k) => k.key),
    description: 'the files must be readable and hold usable PEM (or PKCS12) material.',
    reads: 'files',
    check(config) {
      const problems: Problem[] = [];
      const files = keys.map((k) => readOption(config, k, problems));
      if (problems.length > 0 || files.every((f) => f === undefined)) return problems;
      try {
        load(files, config);
      } catch (err) {
        // OpenSSL's reason ("no start line", "key values mismatch") without any key material.
        return [{ key: keys[0]!.key, message: `cannot be used: ${(err as Error).message.split('\n')[0]}` }];
      }
      return [];
    },
  };
}

/** A CA bundle: one or more PEM certificates, each parseable (OpenSSL itself skips what is not PEM, silently). */
function caBundle(pem: Buffer): void {
  const blocks = pem.toString('utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('it holds no PEM certificate (-----BEGIN CERTIFICATE-----)');
  for (const block of blocks) new X509Certificate(block);
}

const authConfigured = (config: Configuration) => config.getOptional(o.authTokensFile) !== undefined || config.getOptional(o.tlsClientCa) !== undefined;

/**
 * The rules across the gateway's own options (core, artifacts, tokens). Each plugin and each token
 * provider declares its own next to its options; the registry evaluates them all at resolve time.
 */
export const coreRules: readonly ConfigRule[] = [
  {
    keys: [o.restBindAddress.key, o.jarUriEnable.key, o.authTokensFile.key, o.tlsClientCa.key],
    description: 'a non-loopback address with jar URIs on needs authentication.',
    check(config) {
      const problem = exposureProblem(config.get(o.restBindAddress), config.get(o.jarUriEnable), authConfigured(config));
      return problem === undefined ? [] : [{ key: o.restBindAddress.key, message: problem }];
    },
  },
  {
    keys: [o.permissionRead.key, o.permissionSubmit.key, o.permissionCancel.key, o.permissionLogs.key, o.authTokensFile.key, o.tlsClientCa.key],
    description: 'a permission list that names principals needs authentication.',
    check(config) {
      if (authConfigured(config)) return [];
      // gateway.auth.permission.logs names nobody by default (and is open without authentication).
      const logs = config.get(o.permissionLogs);
      return [o.permissionRead, o.permissionSubmit, o.permissionCancel, ...(logs.length > 0 ? [o.permissionLogs] : [])]
        .filter((d) => !config.get(d).includes('*'))
        .map((d) => ({
          key: d.key,
          message: 'names principals, but no authentication is configured: set gateway.auth.tokens-file or gateway.tls.client-ca (without authentication every caller is "anonymous")',
        }));
    },
  },
  {
    keys: [artifactOptions.handoff.key, o.jobManagerUploadDir.key, o.clusterRestUrl.key],
    description: 'shared-dir needs web.upload.dir when fronting an existing JobManager (the embedded cluster has its own).',
    check(config) {
      const fronting = config.getOptional(o.clusterRestUrl) !== undefined;
      if (config.get(artifactOptions.handoff) !== 'shared-dir' || !fronting || config.getOptional(o.jobManagerUploadDir) !== undefined) return [];
      return [{ key: artifactOptions.handoff.key, message: 'shared-dir needs web.upload.dir: set it to the JobManager\'s web.upload.dir as the gateway sees it (a shared volume), or use upload' }];
    },
  },
  pair(o.tlsCert, o.tlsKey, 'the HTTPS listener\'s certificate and its private key'),
  pair(o.clusterCert, o.clusterKey, 'a client certificate for the JobManager and its key'),
  {
    keys: [o.tlsKeystore.key, o.tlsCert.key],
    description: 'the listener\'s identity comes from gateway.tls.keystore or from gateway.tls.cert/key, not both.',
    check(config) {
      if (config.getOptional(o.tlsKeystore) === undefined || config.getOptional(o.tlsCert) === undefined) return [];
      return [{ key: o.tlsKeystore.key, message: 'set either gateway.tls.keystore or gateway.tls.cert/key, not both (one of them would be ignored)' }];
    },
  },
  tlsMaterial([o.tlsCert, o.tlsKey], ([cert, key]) => {
    if (cert && key) createSecureContext({ cert, key });
  }),
  tlsMaterial([o.tlsKeystore], ([pfx], config) => {
    if (pfx) createSecureContext({ pfx, passphrase: config.getOptional(o.tlsKeystorePassword) ?? '' });
  }, [o.tlsKeystorePassword]),
  tlsMaterial([o.clusterCert, o.clusterKey], ([cert, key]) => {
    if (cert && key) createSecureContext({ cert, key });
  }),
  ...[o.tlsClientCa, o.clusterCa, artifactOptions.caBundle].map((ca) => tlsMaterial([ca], ([pem]) => pem && caBundle(pem))),
  {
    keys: [o.authTokensFile.key],
    description: 'the tokens file must be readable and well-formed at start (later edits are re-read and fail closed).',
    reads: 'files',
    check(config) {
      const problems: Problem[] = [];
      const text = readOption(config, o.authTokensFile, problems);
      if (text === undefined) return problems;
      try {
        parseTokensFile(text.toString('utf8'), config.get(o.authTokensFile));
      } catch (err) {
        return [{ key: o.authTokensFile.key, message: (err as Error).message }];
      }
      return [];
    },
  },
  {
    keys: [artifactOptions.cacheDir.key, tokenOptions.storeDir.key, tokenOptions.fileReceiverDir.key],
    description: 'state directories that already exist must be the gateway\'s own (not a symlink, not writable by others); missing ones are created 0700.',
    reads: 'files',
    check(config) {
      const problems: Problem[] = [];
      for (const def of [artifactOptions.cacheDir, tokenOptions.storeDir, tokenOptions.fileReceiverDir]) {
        const dir = config.getOptional(def);
        if (dir === undefined) continue;
        let problem: string | undefined;
        try {
          problem = privateDirProblem(lstatSync(dir));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') problem = `cannot be inspected (${(err as NodeJS.ErrnoException).code})`;
        }
        if (problem !== undefined) problems.push({ key: def.key, message: `${dir} ${problem}; use a directory of the gateway's own user (created 0700 when missing) or fix it with chown/chmod` });
      }
      return problems;
    },
  },
  {
    keys: [],
    severity: 'warning',
    description:
      'a key of one of Flink\'s filesystems that no plugin of this gateway serves (Google Cloud Storage gs.* / fs.gs.*, Alibaba OSS fs.oss.*, ' +
      'Tencent COS fs.cosn.*, Huawei OBS fs.obs.*, Azure Data Lake Gen1 fs.adl.*): its jar URIs are refused, and the key is not used.',
    check(config) {
      const out: { key: string; message: string }[] = [];
      for (const key of config.keys()) {
        // A plugin that serves the scheme (a third-party one) declares its keys: those are its business.
        if (config.registry.lookup(key) !== undefined) continue;
        const fs = UNSERVED_FILESYSTEMS.find(([re]) => re.test(key));
        if (fs) out.push({ key, message: `a Flink filesystem key for ${fs[1]}, which no plugin of this gateway serves: ${fs[1]} jar URIs are refused (GW_FETCH_SCHEME_UNSUPPORTED) and the key is not used` });
      }
      return out;
    },
  },
];

/** Flink filesystems the gateway has no built-in plugin for, by their configuration keys. */
const UNSERVED_FILESYSTEMS: readonly [RegExp, string][] = [
  [/^(?:gs|fs\.gs)\./, 'gs://'],
  [/^fs\.oss\./, 'oss://'],
  [/^fs\.cosn\./, 'cosn://'],
  [/^fs\.obs\./, 'obs://'],
  [/^fs\.adl\./, 'adl://'],
];
