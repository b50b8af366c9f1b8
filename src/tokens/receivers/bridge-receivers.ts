import type { Logger } from 'pino';
import type { DelegationTokenReceiver, TokenContainer, TokenJobListener } from '../../plugin-kit/token-spi';
import type { FileTokenReceiver } from './file-receiver';
import { keepJobs } from './per-job-payload';

export interface BridgeReceiverSetOptions {
  log: Logger;
  /** The `file` delivery, fed with the same payloads when `gateway.tokens.file-receiver.dir` is set. */
  file?: FileTokenReceiver;
}

/**
 * The gateway side of token delivery to a job's tasks (docs/adr/0005-token-delivery.md): one
 * receiver per provider name (the manager pairs providers and receivers by name), each keeping its
 * provider's latest payload for `GET /gateway/v1/tokens/bridge` — which the Flink-side bridge pulls
 * so that Flink's own delegation-token manager distributes it to the TaskManagers — and handing it
 * to the file receiver when one is configured.
 *
 * It also follows the manager's job registry ({@link TokenJobListener}): the container it serves
 * only carries entries of jobs registered now, so a job's tokens leave the bridge as soon as the job
 * is unregistered, even when its provider is not asked to obtain again (a provider with no jobs
 * left is skipped, and its last payload would otherwise be served forever).
 */
export class BridgeReceiverSet implements TokenJobListener {
  private readonly latest = new Map<string, Uint8Array>();
  private readonly known = new Set<string>();

  constructor(private readonly opts: BridgeReceiverSetOptions) {}

  /** One receiver per service name, to hand to the manager with the providers of those names. */
  receiversFor(serviceNames: readonly string[]): DelegationTokenReceiver[] {
    return serviceNames.map((serviceName) => ({
      serviceName,
      init: () => undefined,
      onNewTokensObtained: async (tokens: Uint8Array) => {
        this.latest.set(serviceName, new Uint8Array(tokens));
        this.opts.log.debug({ provider: serviceName, bytes: tokens.byteLength }, 'token bridge: new tokens kept for delivery');
        await this.opts.file?.update(serviceName, tokens);
      },
    }));
  }

  /** The latest tokens of every provider, as the bridge endpoint serves them. */
  container(): TokenContainer {
    const tokens: Record<string, string> = {};
    for (const [name, bytes] of this.latest) {
      tokens[name] = Buffer.from(keepJobs(bytes, (jobId) => this.known.has(jobId))).toString('base64');
    }
    return { version: 1, tokens };
  }

  async jobRegistering(jobId: string): Promise<void> {
    this.known.add(jobId.toLowerCase());
    await this.opts.file?.jobRegistering(jobId);
  }

  async jobUnregistered(jobId: string, cause: 'unregistered' | 'session-end'): Promise<void> {
    this.known.delete(jobId.toLowerCase());
    await this.opts.file?.jobUnregistered(jobId, cause);
  }
}
