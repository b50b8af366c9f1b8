import { Agent } from 'undici';
import { guardedConnector, type ConnectGuard } from '../../src/artifacts/plugin-kit';

/** Connect phase limit: a black-holed endpoint fails in 10 s instead of the OS's minutes. */
export const CONNECT_TIMEOUT_MS = 10_000;
/** Headers and body inactivity limit; without it a body that stalls after the headers hangs forever (storage.md §7). */
export const READ_TIMEOUT_MS = 60_000;

/** The undici Agent that GetObject bodies are read through; every connection passes the restricted-host guard (plugin kit). */
export function createGuardedAgent(guard: ConnectGuard, extraCa: string | undefined): Agent {
  const connect = guardedConnector(guard, { ca: extraCa, timeoutMs: CONNECT_TIMEOUT_MS });
  return new Agent({ connect, headersTimeout: READ_TIMEOUT_MS, bodyTimeout: READ_TIMEOUT_MS, allowH2: false });
}
