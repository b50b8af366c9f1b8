import { createSecureContext } from 'node:tls';
import { coreOptions as o } from '../config/options';
import type { ConfigRule, Configuration } from '../config/registry';
import { caBundleRule, pair, type Problem, readOption, tlsMaterial } from '../config/rule-kit';
import { exposureProblem, parseTokensFile } from './auth';

const authConfigured = (config: Configuration) =>
  config.getOptional(o.authTokensFile) !== undefined || config.getOptional(o.tlsClientCa) !== undefined;

/** The rules across the listener's options: who may reach it, how callers authenticate, its TLS identity. */
export const httpRules: readonly ConfigRule[] = [
  {
    keys: [o.restBindAddress.key, o.jarUriEnable.key, o.authTokensFile.key, o.tlsClientCa.key],
    description: 'a non-loopback address with jar URIs on needs authentication.',
    check(config) {
      const problem = exposureProblem(config.get(o.restBindAddress), config.get(o.jarUriEnable), authConfigured(config));
      return problem === undefined ? [] : [{ key: o.restBindAddress.key, message: problem }];
    },
  },
  {
    keys: [
      o.permissionRead.key,
      o.permissionSubmit.key,
      o.permissionCancel.key,
      o.permissionLogs.key,
      o.authTokensFile.key,
      o.tlsClientCa.key,
    ],
    description: 'a permission list that names principals needs authentication.',
    check(config) {
      if (authConfigured(config)) return [];
      // gateway.auth.permission.logs names nobody by default (and is open without authentication).
      const logs = config.get(o.permissionLogs);
      return [o.permissionRead, o.permissionSubmit, o.permissionCancel, ...(logs.length > 0 ? [o.permissionLogs] : [])]
        .filter((d) => !config.get(d).includes('*'))
        .map((d) => ({
          key: d.key,
          message:
            'names principals, but no authentication is configured: set gateway.auth.tokens-file or gateway.tls.client-ca (without authentication every caller is "anonymous")',
        }));
    },
  },
  pair(o.tlsCert, o.tlsKey, "the HTTPS listener's certificate and its private key"),
  {
    keys: [o.tlsKeystore.key, o.tlsCert.key],
    description: "the listener's identity comes from gateway.tls.keystore or from gateway.tls.cert/key, not both.",
    check(config) {
      if (config.getOptional(o.tlsKeystore) === undefined || config.getOptional(o.tlsCert) === undefined) return [];
      return [
        {
          key: o.tlsKeystore.key,
          message: 'set either gateway.tls.keystore or gateway.tls.cert/key, not both (one of them would be ignored)',
        },
      ];
    },
  },
  tlsMaterial([o.tlsCert, o.tlsKey], ([cert, key]) => {
    if (cert && key) createSecureContext({ cert, key });
  }),
  tlsMaterial(
    [o.tlsKeystore],
    ([pfx], config) => {
      if (pfx) createSecureContext({ pfx, passphrase: config.getOptional(o.tlsKeystorePassword) ?? '' });
    },
    [o.tlsKeystorePassword],
  ),
  caBundleRule(o.tlsClientCa),
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
];
