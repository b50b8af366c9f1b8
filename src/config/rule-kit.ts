import { X509Certificate } from 'node:crypto';
import { lstatSync, readFileSync } from 'node:fs';
import { privateDirProblem } from '../private-dir';
import type { ConfigRule, Configuration } from './registry';
import type { OptionDef } from './types';

/**
 * Building blocks for the rules each feature declares next to its options (`http/http-rules.ts`,
 * `cluster/cluster-rules.ts`, `artifacts/artifact-rules.ts`, …): the registry evaluates them all at
 * resolve time, and `config/` itself knows no feature.
 */
export type Problem = { key: string; message: string };

/** Both options of a pair or neither (a certificate without its key cannot be used, and vice versa). */
export function pair(a: OptionDef<'string'>, b: OptionDef<'string'>, what: string): ConfigRule {
  return {
    keys: [a.key, b.key],
    description: `set both or neither (${what}).`,
    check(config) {
      const hasA = config.getOptional(a) !== undefined;
      const hasB = config.getOptional(b) !== undefined;
      if (hasA === hasB) return [];
      const [set, missing] = hasA ? [a, b] : [b, a];
      return [
        {
          key: missing.key,
          message: `${a.key} and ${b.key} go together: ${set.key} is set, so set ${missing.key} too (${what}), or remove ${set.key}`,
        },
      ];
    },
  };
}

/** Reads a file an option names; a problem naming the option when it cannot be read. */
export function readOption(config: Configuration, def: OptionDef<'string'>, problems: Problem[]): Buffer | undefined {
  const path = config.getOptional(def);
  if (path === undefined) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    problems.push({
      key: def.key,
      message: `cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); fix the path or the file's permissions`,
    });
    return undefined;
  }
}

/** Loads PEM/PKCS12 material the way the listener and the JobManager client will, so a bad file fails start-up. */
export function tlsMaterial(
  keys: OptionDef<'string'>[],
  load: (files: (Buffer | undefined)[], config: Configuration) => void,
  alsoReads: OptionDef[] = [],
): ConfigRule {
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
export function caBundleRule(def: OptionDef<'string'>): ConfigRule {
  return tlsMaterial([def], ([pem]) => {
    if (!pem) return;
    const blocks = pem.toString('utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    if (blocks.length === 0) throw new Error('it holds no PEM certificate (-----BEGIN CERTIFICATE-----)');
    for (const block of blocks) new X509Certificate(block);
  });
}

/** State directories that already exist must be the gateway's own; missing ones are created 0700 later. */
export function privateDirsRule(defs: readonly OptionDef<'string'>[]): ConfigRule {
  return {
    keys: defs.map((d) => d.key),
    description:
      "state directories that already exist must be the gateway's own (not a symlink, not writable by others); missing ones are created 0700.",
    reads: 'files',
    check(config) {
      const problems: Problem[] = [];
      for (const def of defs) {
        const dir = config.getOptional(def);
        if (dir === undefined) continue;
        let problem: string | undefined;
        try {
          problem = privateDirProblem(lstatSync(dir));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') problem = `cannot be inspected (${(err as NodeJS.ErrnoException).code})`;
        }
        if (problem !== undefined)
          problems.push({
            key: def.key,
            message: `${dir} ${problem}; use a directory of the gateway's own user (created 0700 when missing) or fix it with chown/chmod`,
          });
      }
      return problems;
    },
  };
}
