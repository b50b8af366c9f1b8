import type { FileSystem, FsPluginDefinition, PluginContext } from './fs-plugin';

/**
 * Scheme → plugin. File systems are created once, on first use, and closed together.
 * Duplicate schemes across plugins fail start-up.
 */
export class PluginRegistry {
  private readonly bySchemes = new Map<string, FsPluginDefinition>();
  private readonly instances = new Map<string, FileSystem>();

  constructor(readonly plugins: readonly FsPluginDefinition[], private readonly ctxFor: (plugin: FsPluginDefinition) => PluginContext) {
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

  async close(): Promise<void> {
    await Promise.allSettled([...this.instances.values()].map((fs) => fs.close()));
    this.instances.clear();
  }
}
