import type { Logger } from 'pino';
import type { Clock } from '../clock';
import { describeCause } from '../plugin-kit/registration-error';
import type { DelegationTokenProvider, DelegationTokenReceiver, TokenContainer } from '../plugin-kit/token-spi';

/** What the status route shows per provider (never a token). */
export interface ProviderState {
  lastObtainAt?: number;
  validUntil?: number;
  lastError?: string;
}

export interface RoundResult {
  tokens: Map<string, Uint8Array>;
  /** The minimum `validUntil` over the providers that gave one. */
  earliestValidUntil: number | undefined;
}

/**
 * One round over all providers, as Flink's manager runs it, sequential and fail-fast: the first failure aborts
 * the round and nothing obtained so far is distributed. Synchronous throws, rejections and thrown
 * non-Errors are all caught (no `Error` escapes as in Flink).
 */
export async function obtainRound(
  providers: ReadonlyMap<string, DelegationTokenProvider>,
  states: Map<string, ProviderState>,
  clock: Clock,
  log: Logger,
): Promise<RoundResult> {
  const tokens = new Map<string, Uint8Array>();
  let earliest: number | undefined;
  for (const [name, p] of providers) {
    const state = states.get(name) ?? {};
    try {
      if (!(await p.delegationTokensRequired())) {
        log.debug({ provider: name }, 'Service does not need to obtain delegation token');
        continue;
      }
      const t = await p.obtainDelegationTokens();
      if (t === null || t === undefined || !(t.tokens instanceof Uint8Array))
        throw new Error('Obtained delegation tokens must not be null');
      // A NaN expiry would become setTimeout(NaN), i.e. a cycle every millisecond.
      if (t.validUntil !== undefined && !Number.isFinite(t.validUntil))
        throw new Error(`validUntil must be epoch milliseconds, got ${String(t.validUntil)}`);
      tokens.set(name, t.tokens);
      state.lastObtainAt = clock.wallMs();
      if (t.validUntil === undefined) delete state.validUntil;
      else {
        state.validUntil = t.validUntil;
        earliest = earliest === undefined ? t.validUntil : Math.min(earliest, t.validUntil);
      }
      delete state.lastError;
    } catch (err) {
      state.lastError = describeCause(err);
      log.error({ provider: name, err }, 'Failed to obtain delegation token for provider');
      throw new Error(`provider ${name}: ${describeCause(err)}`, { cause: err });
    } finally {
      states.set(name, state);
    }
  }
  return { tokens, earliestValidUntil: earliest };
}

/** Every service's tokens go to its receiver; one receiver's failure does not stop the others. */
export async function notifyReceivers(
  receivers: ReadonlyMap<string, DelegationTokenReceiver>,
  tokens: Map<string, Uint8Array>,
  log: Logger,
): Promise<void> {
  for (const name of tokens.keys()) {
    if (!receivers.has(name)) throw new Error(`Tokens arrived for service but no receiver found for it: ${name}`);
  }
  for (const [name, bytes] of tokens) {
    try {
      await receivers.get(name)!.onNewTokensObtained(bytes);
    } catch (err) {
      log.warn({ receiver: name, err }, 'Failed to send tokens to delegation token receiver');
    }
  }
}

/** The listener's container: versioned JSON, base64 per service (no Java serialisation). */
export function toContainer(tokens: Map<string, Uint8Array>): TokenContainer {
  const out: Record<string, string> = {};
  for (const [name, bytes] of tokens) out[name] = Buffer.from(bytes).toString('base64');
  return { version: 1, tokens: out };
}
