import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { FsPluginDefinition } from '../plugin-kit/fs-plugin';
import type { Configuration } from '../config/registry';
import { isLoopbackAddress } from '../net/loopback';
import { tokenProvidersOf } from './providers';
import { BridgeReceiverSet } from './receivers/bridge-receivers';
import { BridgeSecret } from './receivers/bridge-secret';
import { FileTokenReceiver } from './receivers/file-receiver';
import type { DelegationTokenProvider, DelegationTokenReceiver } from '../plugin-kit/token-spi';
import { tokenOptions, tokensEnabled } from './token-options';

/**
 * The delegation-token providers and receivers to load (each enabled unless
 * `security.delegation.token.provider.<name>.enabled: false`). A provider with a receiver of the same
 * name in `receivers` has its tokens applied by that receiver; every other provider is paired with
 * the gateway's delivery receiver (`BridgeReceiverSet`: the token bridge endpoint, and the file
 * receiver when `gateway.tokens.file-receiver.dir` is set), which takes its tokens to the job's tasks.
 */
export interface TokenServices {
  providers?: readonly DelegationTokenProvider[];
  receivers?: readonly DelegationTokenReceiver[];
}

/**
 * The built-in providers (the plugins' own — s3, azure-blob — and oauth2), for `main.ts`. Each is
 * enabled by default and stays inactive until its credentials are configured (then it obtains
 * tokens for registered jobs); a job asking an unconfigured one for something is rejected.
 */
export function builtInTokenServices(logger: Logger, plugins: readonly FsPluginDefinition[], ca: string | undefined): TokenServices {
  const log = logger.child({ component: 'tokens' });
  return { providers: tokenProvidersOf(plugins).map((p) => p.create({ log, ...(ca ? { ca } : {}) })) };
}

/** Where job registrations, job-id claims (and by default the bridge secret) are kept: by default under the jar cache's directory. */
export function tokenStoreDir(config: Configuration, cacheDir: string): string {
  return config.getOptional(tokenOptions.storeDir) ?? join(cacheDir, 'registrations');
}

/** The gateway's side of delivering tokens to the job's tasks (docs/adr/0005-token-delivery.md). */
export interface TokenDelivery {
  receivers: BridgeReceiverSet;
  file?: FileTokenReceiver;
  /** Absent when gateway.tokens.bridge-enabled is false. */
  secret?: BridgeSecret;
}

export async function createTokenDelivery(config: Configuration, log: Logger, storeDir: string): Promise<TokenDelivery | undefined> {
  if (!tokensEnabled(config)) return undefined;
  const dir = config.getOptional(tokenOptions.fileReceiverDir);
  const file = dir ? new FileTokenReceiver({ dir, log }) : undefined;
  await file?.init();
  const secret = config.get(tokenOptions.bridgeEnabled)
    ? BridgeSecret.loadOrCreate(resolve(config.getOptional(tokenOptions.bridgeSecretFile) ?? join(storeDir, 'bridge-secret')), log)
    : undefined;
  return { receivers: new BridgeReceiverSet({ log, ...(file ? { file } : {}) }), ...(file ? { file } : {}), ...(secret ? { secret } : {}) };
}

/** The receivers to load: the caller's own, and the delivery's for every provider without one. */
export function receiversFor(services: TokenServices, delivery: TokenDelivery | undefined): DelegationTokenReceiver[] {
  const own = new Set((services.receivers ?? []).map((r) => r.serviceName));
  const names = (services.providers ?? []).map((p) => p.serviceName).filter((name) => !own.has(name));
  return [...(services.receivers ?? []), ...(delivery ? delivery.receivers.receiversFor(names) : [])];
}

/**
 * The file through which a cluster the gateway launched finds the gateway's token bridge: a private
 * directory whose `url` file holds the gateway's URL, written once the gateway listens (its port
 * may be ephemeral), removed with the cluster.
 */
export class BridgeUrlFile {
  readonly dir = mkdtempSync(join(tmpdir(), 'flink-jar-gateway-bridge-'));
  readonly path = join(this.dir, 'url');

  constructor(private readonly log: Logger) {}

  /** Flink configuration of the launched cluster: its token bridge pulls from this gateway. */
  flinkConfig(config: Configuration, secret: BridgeSecret): Record<string, string> {
    const out: Record<string, string> = {
      'security.delegation.token.provider.gateway.url-file': this.path,
      'security.delegation.token.provider.gateway.secret-file': secret.path,
    };
    const poll = config.value('security.delegation.token.provider.gateway.poll-interval');
    if (poll !== undefined) out['security.delegation.token.provider.gateway.poll-interval'] = String(poll);
    // The embedded cluster loads no other token provider that obtains anything, so pulling often
    // re-obtains nothing else: a new job's first tokens arrive within one poll interval.
    out['security.delegation.token.provider.gateway.idle-interval'] = poll !== undefined ? String(poll) : '10 s';
    // Flink 2.1 retries a failed cycle (e.g. a push to a TaskManager that is reconnecting) after a
    // fixed 1 h by default; the bridge's cycles are cheap, so retry after one poll interval.
    out['security.delegation.tokens.renewal.retry.backoff'] = poll !== undefined ? String(poll) : '10 s';
    return out;
  }

  /** Publishes where the gateway listens (the bridge endpoint answers loopback clients only). */
  write(address: AddressInfo, tls: boolean): void {
    const host = address.address;
    if (!(host === '0.0.0.0' || host === '::' || isLoopbackAddress(host))) {
      this.log.warn(
        { address: host },
        "the gateway listens on a non-loopback address only, so the embedded cluster's token bridge cannot reach it (the bridge endpoint answers loopback clients only)",
      );
      return;
    }
    const url = `${tls ? 'https' : 'http'}://${host === '::1' ? '[::1]' : '127.0.0.1'}:${address.port}`;
    const tmp = join(this.dir, `url.${process.pid}.tmp`);
    writeFileSync(tmp, `${url}\n`, { mode: 0o600 });
    renameSync(tmp, this.path);
    this.log.info({ url }, "the embedded cluster's token bridge pulls tokens from this gateway");
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
