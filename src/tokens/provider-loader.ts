import type { Logger } from 'pino';
import type { Configuration } from '../config/registry';
import { isProviderEnabled, providerConfig } from './provider-config';
import type { DelegationTokenManagerCallback, DelegationTokenProvider, DelegationTokenReceiver } from '../plugin-kit/token-spi';

export interface LoadedServices {
  /** In the order given by the composition root (the reference leaves the order unspecified). */
  providers: Map<string, DelegationTokenProvider>;
  receivers: Map<string, DelegationTokenReceiver>;
}

/** Start-up failure of the token framework; stops the gateway from starting. */
export class TokenStartupError extends Error {
  readonly code = 'GW_TOKENS_STARTUP';
}

/**
 * Loads providers and receivers the way Flink's manager does, with two rules
 * tightened: duplicate names are refused *before* any `init` (Flink checks after, so the duplicate
 * is already initialised), and providers and receivers must have the same *name sets* (Flink
 * compares only counts). Disabled services are skipped; any `init` failure fails start-up, after
 * closing the providers already initialised.
 */
export async function loadServices(opts: {
  config: Configuration;
  providers: readonly DelegationTokenProvider[];
  receivers: readonly DelegationTokenReceiver[];
  callback: DelegationTokenManagerCallback;
  log: Logger;
}): Promise<LoadedServices> {
  const { config, log } = opts;
  const enabledProviders = enabledOnly(config, opts.providers, 'provider', log);
  const enabledReceivers = enabledOnly(config, opts.receivers, 'receiver', log);
  checkUnique(enabledProviders, 'provider');
  checkUnique(enabledReceivers, 'receiver');
  checkSameNames(enabledProviders, enabledReceivers);

  log.info('Loading delegation token providers');
  const providers = new Map<string, DelegationTokenProvider>();
  for (const p of enabledProviders) {
    try {
      await p.init(providerConfig(config, p.serviceName), opts.callback);
    } catch (err) {
      log.error({ provider: p.serviceName, err }, 'Failed to initialize delegation token provider');
      await closeQuietly(providers, log);
      throw new TokenStartupError(
        `delegation token provider '${p.serviceName}' failed to initialise: ${(err as Error)?.message ?? String(err)}`,
        { cause: err },
      );
    }
    providers.set(p.serviceName, p);
    log.info({ provider: p.serviceName }, 'Delegation token provider loaded and initialized');
  }
  const receivers = new Map<string, DelegationTokenReceiver>();
  for (const r of enabledReceivers) {
    try {
      await r.init(providerConfig(config, r.serviceName, 'receiver'));
    } catch (err) {
      log.error({ receiver: r.serviceName, err }, 'Failed to initialize delegation token receiver');
      await closeQuietly(providers, log);
      throw new TokenStartupError(
        `delegation token receiver '${r.serviceName}' failed to initialise: ${(err as Error)?.message ?? String(err)}`,
        { cause: err },
      );
    }
    receivers.set(r.serviceName, r);
  }
  warnSamePrefix([...providers.keys()], log);
  return { providers, receivers };
}

function enabledOnly<T extends { serviceName: string }>(config: Configuration, services: readonly T[], kind: string, log: Logger): T[] {
  const out: T[] = [];
  for (const s of services) {
    if (typeof s.serviceName !== 'string' || s.serviceName.trim() === '' || /\s/.test(s.serviceName)) {
      throw new TokenStartupError(`a delegation token ${kind} has an invalid service name '${String(s.serviceName)}'`);
    }
    if (isProviderEnabled(config, s.serviceName)) out.push(s);
    else log.info({ [kind]: s.serviceName }, `Delegation token ${kind} is disabled so not loaded`);
  }
  return out;
}

function checkUnique(services: readonly { serviceName: string }[], kind: string): void {
  const seen = new Set<string>();
  for (const s of services) {
    if (seen.has(s.serviceName))
      throw new TokenStartupError(`Delegation token ${kind} with service name ${s.serviceName} has multiple implementations`);
    seen.add(s.serviceName);
  }
}

function checkSameNames(providers: readonly { serviceName: string }[], receivers: readonly { serviceName: string }[]): void {
  const p = new Set(providers.map((s) => s.serviceName));
  const r = new Set(receivers.map((s) => s.serviceName));
  const missingReceivers = [...p].filter((n) => !r.has(n));
  const missingProviders = [...r].filter((n) => !p.has(n));
  const problems: string[] = [];
  if (missingReceivers.length > 0) problems.push(`Missing receivers: ${missingReceivers.join(',')}`);
  if (missingProviders.length > 0) problems.push(`Missing providers: ${missingProviders.join(',')}`);
  if (problems.length > 0) {
    throw new TokenStartupError(
      `Delegation token providers and receivers must come in pairs with the same service names. ${problems.join('. ')}`,
    );
  }
}

/** `s3-hadoop` and `s3-presto` both loaded: Flink only warns (docs/tokens.md, edge case 6). */
function warnSamePrefix(names: readonly string[], log: Logger): void {
  const byPrefix = new Map<string, number>();
  for (const n of names) {
    const prefix = n.split('-')[0]!;
    byPrefix.set(prefix, (byPrefix.get(prefix) ?? 0) + 1);
  }
  for (const [prefix, count] of byPrefix) {
    if (count > 1) {
      log.warn(
        { prefix },
        `Multiple providers loaded with the same prefix: ${prefix}. This might lead to unintended consequences, please consider using only one of them.`,
      );
    }
  }
}

async function closeQuietly(providers: Map<string, DelegationTokenProvider>, log: Logger): Promise<void> {
  for (const [name, p] of providers) {
    try {
      await p.close?.();
    } catch (err) {
      log.error({ provider: name, err }, 'Failed to close delegation token provider');
    }
  }
}
