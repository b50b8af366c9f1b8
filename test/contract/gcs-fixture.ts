import pino from 'pino';
import { gcsPlugin } from '../../fs-plugins/gcs';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { createConnectGuard } from '../../src/net/connect-guard';

const raw = (settings: Record<string, string>) =>
  new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));

/** A gs file system built the gateway's way, trusting the test CA, with only `allowed` exempt from the guard. */
export function gcsFileSystem(settings: Record<string, string>, allowed: string[], ca?: string): FileSystem {
  return gcsPlugin.create({
    config: new OptionsRegistry(gcsPlugin.options, gcsPlugin.rules).resolve(raw(settings)),
    log: pino({ level: 'silent' }),
    guard: createConnectGuard({ enabled: true, allowed }),
    ...(ca !== undefined ? { ca } : {}),
  });
}

/** The base64 body of a PEM private key (what a leak would show). */
export const keyBody = (pem: string) =>
  pem
    .split('\n')
    .filter((l) => l && !l.startsWith('-----'))
    .join('')
    .slice(20, 80);
