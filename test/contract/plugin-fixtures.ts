import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import pino from 'pino';
import { createConnectGuard } from '../../src/net/connect-guard';
import type { FileSystem, FsPluginDefinition } from '../../src/plugin-kit/fs-plugin';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';

/**
 * A plugin's FileSystem built the way the gateway builds it: the plugin's options → registry →
 * `create(ctx)`, with the restricted-host guard on and only `allowed` host:port entries exempt.
 */
export function pluginFileSystem(plugin: FsPluginDefinition, settings: Record<string, string>, allowed: string[]): FileSystem {
  const raw = new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));
  return plugin.create({
    config: new OptionsRegistry(plugin.options, plugin.rules).resolve(raw),
    log: pino({ level: 'silent' }),
    guard: createConnectGuard({ enabled: true, allowed }),
  });
}

/** Writes `size` random bytes to a file and returns their SHA-256 (keeps the bytes out of the heap). */
export async function randomFile(path: string, size: number): Promise<string> {
  const hash = createHash('sha256');
  const out = createWriteStream(path);
  for (let left = size; left > 0; left -= 1024 * 1024) {
    const chunk = randomBytes(Math.min(left, 1024 * 1024));
    hash.update(chunk);
    if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return hash.digest('hex');
}

export async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
