import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinPlugins } from '../../../fs-plugins';
import { loadThirdPartyPlugins } from '../../../src/artifacts/plugin-loader';
import { projectRoot } from '../../../src/project-root';

const bad = (name: string) => join(projectRoot(__dirname), 'test/fixtures/plugins-bad', name);

/** Runs the loader and returns what it threw (failing the test when it did not throw). */
function failure(dir: string, options?: Parameters<typeof loadThirdPartyPlugins>[1]): Error & { code?: string } {
  try {
    loadThirdPartyPlugins(dir, options);
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error(`loading ${dir} succeeded`);
}

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'gw-plugin-loader-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Writes one plugin folder under `root`; `manifest` overrides the valid defaults. */
async function plugin(folder: string, manifest: Record<string, unknown> = {}, code?: string): Promise<string> {
  const dir = join(root, folder);
  await mkdir(dir, { recursive: true });
  const m = { name: folder, schemes: [folder], entry: 'index.js', contractVersion: 1, ...manifest };
  await writeFile(join(dir, 'manifest.json'), JSON.stringify(m));
  const def = `{ name: ${JSON.stringify(m.name)}, schemes: ${JSON.stringify(m.schemes)}, options: [], create: () => ({}) }`;
  await writeFile(join(dir, 'index.js'), code ?? `exports.plugin = ${def};\n`);
  return dir;
}

describe('loadThirdPartyPlugins', () => {
  it('loads the fixture plugin with its options', () => {
    const plugins = loadThirdPartyPlugins(join(projectRoot(__dirname), 'test/fixtures/plugins'));
    expect(plugins.map((p) => p.name)).toEqual(['fixture-store']);
    expect(plugins[0]!.options.map((o) => o.key)).toEqual(['fixture.root', 'fixture.token']);
  });

  it('takes `default` when there is no `plugin` export, and ignores plain files in the directory', async () => {
    await plugin('alpha', {}, "module.exports = { default: { name: 'alpha', schemes: ['alpha'], options: [], create() {} } };\n");
    await writeFile(join(root, 'README.md'), 'plugins live here');
    expect(loadThirdPartyPlugins(root).map((p) => p.name)).toEqual(['alpha']);
  });

  it('refuses an unsupported contract version before loading the module', () => {
    const err = failure(bad('bad-version'));
    expect(err.code).toBe('GW_PLUGIN_LOAD_FAILED');
    expect(err.message).toBe(
      `plugin 'future-store' in ${join(bad('bad-version'), 'future-store')} declares contract version 2; this gateway supports 1`,
    );
  });

  it('refuses a missing entry module', () => {
    const err = failure(bad('missing-entry'));
    expect(err.code).toBe('GW_PLUGIN_LOAD_FAILED');
    expect(err.message).toMatch(/^plugin 'lost-store' in \S+lost-store: the entry 'dist\/index\.js' does not exist \(ENOENT\)$/);
  });

  it('reports a module that throws while loading, with its message', () => {
    const err = failure(bad('throwing-module'));
    expect(err.code).toBe('GW_PLUGIN_LOAD_FAILED');
    expect(err.message).toMatch(
      /^plugin 'broken-store' in \S+broken-store: loading index\.js failed: broken-store: cannot find the native binding/,
    );
    expect(err.message).not.toContain('\n');
  });

  it('refuses a folder without a manifest instead of skipping it', async () => {
    await mkdir(join(root, 'notes'));
    await writeFile(join(root, 'notes', 'index.js'), '');
    const err = failure(root);
    expect(err.code).toBe('GW_PLUGIN_LOAD_FAILED');
    expect(err.message).toContain(`the plugin folder ${join(root, 'notes')} has no manifest.json`);
  });

  it('says so when the directory is a plugin folder rather than its parent, or does not exist', async () => {
    const dir = await plugin('alpha');
    expect(failure(dir).message).toContain('gateway.plugins.dir must be the directory that contains the plugin folders');
    expect(failure(join(root, 'nope'))).toMatchObject({ code: 'GW_PLUGIN_LOAD_FAILED', message: expect.stringContaining('(ENOENT)') });
  });

  it('reports every manifest problem at once', async () => {
    await plugin('alpha', { name: 'Alpha', schemes: ['S3'], entry: 42, contractVersion: '1' });
    const err = failure(root);
    expect(err.code).toBe('GW_PLUGIN_LOAD_FAILED');
    expect(err.message).toContain(`the manifest of ${join(root, 'alpha')} is invalid`);
    for (const field of ['"name"', 'scheme "S3" is not a lower-case URI scheme', '"entry"', '"contractVersion"'])
      expect(err.message).toContain(field);
  });

  it('refuses a definition whose name or schemes differ from the manifest', async () => {
    await plugin('alpha', {}, "exports.plugin = { name: 'beta', schemes: ['alpha', 'beta'], options: [], create() {} };\n");
    const err = failure(root);
    expect(err.code).toBe('GW_PLUGIN_LOAD_FAILED');
    expect(err.message).toContain(
      `plugin 'alpha' in ${join(root, 'alpha')}: index.js exports a plugin named "beta", but the manifest says 'alpha'`,
    );
    expect(err.message).toContain('exports the schemes ["alpha","beta"], but the manifest says ["alpha"]');
  });

  it('refuses a module without a definition, or an incomplete one', async () => {
    await plugin('alpha', {}, 'exports.something = 1;\n');
    expect(failure(root).message).toContain('index.js exports no plugin definition: export it as `plugin`');
    await rm(join(root, 'alpha'), { recursive: true });
    await plugin('beta', {}, "exports.plugin = { name: 'beta', schemes: ['beta'], options: [{ key: 'beta.x', type: 'float' }] };\n");
    const err = failure(root);
    expect(err.message).toContain('exports no create(ctx) function');
    expect(err.message).toContain('declares the option beta.x with an unknown type "float"');
  });

  it('refuses an entry that escapes the plugin folder, by path or by link', async () => {
    await writeFile(join(root, 'outside.js'), "exports.plugin = { name: 'alpha', schemes: ['alpha'], options: [], create() {} };\n");
    await plugin('alpha', { entry: '../outside.js' });
    expect(failure(root)).toMatchObject({
      code: 'GW_PLUGIN_LOAD_FAILED',
      message: `plugin 'alpha' in ${join(root, 'alpha')}: the entry '../outside.js' points outside the plugin folder`,
    });
    await rm(join(root, 'alpha'), { recursive: true });
    await plugin('beta', { entry: join(root, 'outside.js') });
    expect(failure(root).message).toContain('points outside the plugin folder');
    await rm(join(root, 'beta'), { recursive: true });
    const dir = await plugin('gamma', { entry: 'link.js' });
    await symlink(join(root, 'outside.js'), join(dir, 'link.js'));
    expect(failure(root).message).toContain(`the entry 'link.js' is a link leading outside the plugin folder`);
  });

  it('refuses a name, scheme or option key that a built-in plugin or another folder already has', async () => {
    await plugin('alpha', { schemes: ['s3'] });
    expect(failure(root, { builtins: builtinPlugins }).message).toBe(
      `plugin 'alpha' in ${join(root, 'alpha')} claims the scheme 's3', which the built-in plugin 's3' already serves; each scheme has one plugin`,
    );
    await rm(join(root, 'alpha'), { recursive: true });
    await plugin('http', { schemes: ['web'] });
    expect(failure(root, { builtins: builtinPlugins }).message).toContain("the name 'http' is already taken by a built-in plugin");
    await rm(join(root, 'http'), { recursive: true });
    await plugin('one', { schemes: ['same'] });
    await plugin('two', { schemes: ['same'] });
    expect(failure(root).message).toContain(
      `plugin 'two' in ${join(root, 'two')} claims the scheme 'same', which the plugin 'one' in ${join(root, 'one')} already serves`,
    );
    await rm(join(root, 'one'), { recursive: true });
    await rm(join(root, 'two'), { recursive: true });
    const opt = "{ key: 'rest.port', type: 'int', description: 'd', section: 's' }";
    // A fresh folder name: the module loader caches by path.
    await plugin('delta', {}, `exports.plugin = { name: 'delta', schemes: ['delta'], options: [${opt}], create() {} };\n`);
    expect(failure(root, { optionKeys: ['rest.port'] }).message).toContain(
      'declares the option rest.port, which the gateway already declares',
    );
  });
});
