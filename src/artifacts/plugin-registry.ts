import type { FileSystem, FsPluginDefinition, PluginContext } from '../plugin-kit/fs-plugin';

/**
 * Scheme → plugin. File systems are created once, on first use, and closed together.
 * Duplicate schemes across plugins fail start-up.
 */
export class PluginRegistry {
  private readonly bySchemes = new Map<string, FsPluginDefinition>();
  private readonly instances = new Map<string, FileSystem>();

  constructor(
    readonly plugins: readonly FsPluginDefinition[],
    private ctxFor: (plugin: FsPluginDefinition) => PluginContext,
  ) {
    for (const p of plugins) {
      for (const scheme of p.schemes) {
        const other = this.bySchemes.get(scheme);
        if (other) throw new Error(`filesystem plugins '${other.name}' and '${p.name}' both claim the scheme '${scheme}'`);
        this.bySchemes.set(scheme, p);
      }
    }
  }

  schemes(): string[] {
    return [...this.bySchemes.keys()];
  }

  pluginFor(scheme: string): FsPluginDefinition | undefined {
    return this.bySchemes.get(scheme);
  }

  fileSystemFor(scheme: string): FileSystem | undefined {
    const plugin = this.bySchemes.get(scheme);
    if (!plugin) return undefined;
    let fs = this.instances.get(plugin.name);
    if (!fs) {
      fs = plugin.create(this.ctxFor(plugin));
      this.instances.set(plugin.name, fs);
    }
    return fs;
  }

  /**
   * New settings (rotated credentials): later fetches get fresh file systems; the old ones finish
   * what they are doing and are then closed.
   */
  reconfigure(ctxFor: (plugin: FsPluginDefinition) => PluginContext): void {
    this.ctxFor = ctxFor;
    const old = [...this.instances.values()];
    this.instances.clear();
    for (const fs of old) void fs.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.instances.values()].map((fs) => fs.close()));
    this.instances.clear();
  }
}
