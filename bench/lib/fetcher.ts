import { rmSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { ArtifactFetcher } from '../../src/artifacts/artifact-fetcher';
import { downloadTo } from '../../src/download/download';
import { createConnectGuard } from '../../src/net/connect-guard';
import { fetchError } from '../../src/plugin-kit/fetch-error';
import { FetchProgress } from '../../src/artifacts/fetch-progress';
import type { FsPluginDefinition } from '../../src/plugin-kit/fs-plugin';
import { JarCache } from '../../src/artifacts/jar-cache';
import { artifactOptions, fetchSettings } from '../../src/artifacts/options';
import { PluginRegistry } from '../../src/artifacts/plugin-registry';
import { FetchQueue } from '../../src/artifacts/fetch-queue';
import { createRegistry } from '../../src/composition';
import type { Configuration, RawEntry } from '../../src/config/registry';

/**
 * The gateway's fetch path, wired as src/composition.ts wires it (same options registry, connect
 * guard, plugin registry, cache and ArtifactFetcher), but in this process and without the HTTP
 * layer, so a benchmark times exactly: policy → stat → open → SHA-256 + size check → temp file →
 * zip check → rename into the cache.
 */
export class BenchFetcher {
  readonly config: Configuration;
  readonly plugins: PluginRegistry;
  /** How the last fetch read the object (its 'jar fetched' line): parts and how many at once. */
  private lastRead: { parts: number; atOnce: number } | undefined;
  private readonly log = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        if (!line.includes('"msg":"jar fetched"')) return;
        const o = JSON.parse(line) as { parts?: number; atOnce?: number };
        this.lastRead = { parts: o.parts ?? 1, atOnce: o.atOnce ?? 1 };
      },
    },
  );
  private n = 0;

  constructor(
    private readonly scratchDir: string,
    pluginDefs: readonly FsPluginDefinition[],
    options: Record<string, string>,
  ) {
    const raw = new Map<string, RawEntry>();
    for (const [k, v] of Object.entries(options)) raw.set(k, { value: v, source: 'bench' });
    this.config = createRegistry(pluginDefs).resolve(raw);
    const guard = createConnectGuard({
      enabled: this.config.get(artifactOptions.disallowRestrictedHosts),
      allowed: this.config.get(artifactOptions.restrictedHostsAllowed),
    });
    this.plugins = new PluginRegistry(pluginDefs, (p) => ({
      config: this.config,
      log: this.log.child({ plugin: p.name }),
      guard,
      errors: fetchError,
    }));
  }

  /**
   * One fetch into a brand-new cache (so it is always a miss and always writes a new file), pinned
   * to `sha256` if given. Returns the wall time of `ArtifactFetcher.fetch` and what it produced.
   */
  async fetchOnce(
    uri: string,
    sha256?: string,
  ): Promise<{ ms: number; size: number; sha256: string; read?: { parts: number; atOnce: number } | undefined }> {
    const dir = join(this.scratchDir, `fetch-cache-${this.n++}`);
    const cache = new JarCache(dir, 64 * 1024 ** 3, this.log);
    await cache.init();
    const fetcher = new ArtifactFetcher({
      plugins: this.plugins,
      cache,
      slots: new FetchQueue(4, 32),
      progress: new FetchProgress(),
      allowedSchemes: this.config.get(artifactOptions.allowedSchemes),
      maxBytes: this.config.get(artifactOptions.maxSize),
      timeoutMs: this.config.get(artifactOptions.fetchTimeout),
      retries: 0,
      parallel: fetchSettings(this.config).parallel,
      progressIntervalMs: 60_000,
      log: this.log,
    });
    try {
      this.lastRead = undefined;
      const started = performance.now();
      const jar = await fetcher.fetch(uri, sha256 !== undefined ? { sha256 } : {});
      const ms = performance.now() - started;
      jar.release();
      if (jar.fromCache) throw new Error('expected a cache miss');
      return { ms, size: jar.size, sha256: jar.sha256, read: this.lastRead };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /**
   * The download step alone (plugin `open` → SHA-256 + size check → new file), for URIs whose
   * `stat` the fetcher cannot do (see the fetch measure's `gatewayPath`).
   */
  async downloadOnce(uri: string): Promise<{ ms: number; size: number; sha256: string }> {
    const url = new URL(uri);
    const fs = this.plugins.fileSystemFor(url.protocol.slice(0, -1))!;
    const file = join(this.scratchDir, `download-${this.n++}.part`);
    try {
      const started = performance.now();
      const r = await downloadTo(fs, url, file, {
        signal: AbortSignal.timeout(120_000),
        maxBytes: this.config.get(artifactOptions.maxSize),
        onProgress: () => undefined,
      });
      return { ms: performance.now() - started, size: r.size, sha256: r.sha256 };
    } finally {
      rmSync(file, { force: true });
    }
  }

  close(): Promise<void> {
    return this.plugins.close();
  }
}
