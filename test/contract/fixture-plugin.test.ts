import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createConnectGuard } from '../../src/net/connect-guard';
import { fetchError } from '../../src/plugin-kit/fetch-error';
import type { FileSystem, FsPluginDefinition } from '../../src/plugin-kit/fs-plugin';
import { loadThirdPartyPlugins } from '../../src/artifacts/plugin-loader';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { projectRoot } from '../../src/project-root';
import { fsPluginContract } from './fs-plugin-contract';
import { randomFile } from './plugin-fixtures';

// A third-party plugin (plain JavaScript, loaded from its folder by the gateway's loader) must pass
// the same contract as the built-in ones.
const LARGE_SIZE = 32 * 1024 * 1024;
const TOKEN = `fixture-token-${randomBytes(8).toString('hex')}`;
const WRONG_TOKEN = `wrong-token-${randomBytes(8).toString('hex')}`;

/** Built the gateway's way: loaded from the plugins directory, options → registry → create(ctx). */
function fixtureFs(plugin: FsPluginDefinition, settings: Record<string, string>): FileSystem {
  const raw = new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));
  return plugin.create({
    config: new OptionsRegistry(plugin.options, plugin.rules).resolve(raw),
    log: pino({ level: 'silent' }),
    guard: createConnectGuard({ enabled: true, allowed: [] }),
    errors: fetchError,
  });
}

fsPluginContract(
  'third-party fixture-store',
  async () => {
    const [plugin] = loadThirdPartyPlugins(join(projectRoot(__dirname), 'test/fixtures/plugins'));
    expect(plugin).toMatchObject({ name: 'fixture-store', schemes: ['fixture'] });
    const root = await mkdtemp(join(tmpdir(), 'gw-fixture-store-'));
    const small = randomBytes(10_000);
    await writeFile(join(root, 'small.jar'), small);
    await writeFile(join(root, '.token'), `${TOKEN}\n`);
    const largeSha = await randomFile(join(root, 'large.jar'), LARGE_SIZE);
    const fs = fixtureFs(plugin!, { 'fixture.root': root, 'fixture.token': TOKEN });
    return {
      fs,
      wrongCredentialsFs: fixtureFs(plugin!, { 'fixture.root': root, 'fixture.token': WRONG_TOKEN }),
      guardedFs: fs, // unused: the guard case is skipped below
      small: { uri: new URL('fixture:///small.jar'), content: small },
      large: { uri: new URL('fixture:///large.jar'), size: LARGE_SIZE, sha256: largeSha },
      missing: new URL('fixture:///missing.jar'),
      secrets: [TOKEN, WRONG_TOKEN],
      close: () => rm(root, { recursive: true, force: true }),
    };
  },
  // A local store opens no network connection, so the restricted-host guard has nothing to refuse.
  // A local file has no version to pin a range to: it is read in one stream.
  { guardNotApplicable: true, pinnedRangesNotSupported: true },
);

describe('fixture-store: what the contract suite does not cover', () => {
  it('declares its token as sensitive and never serves the token file', async () => {
    const [plugin] = loadThirdPartyPlugins(join(projectRoot(__dirname), 'test/fixtures/plugins'));
    expect(new OptionsRegistry(plugin!.options).isSensitive('fixture.token')).toBe(true);
    const root = await mkdtemp(join(tmpdir(), 'gw-fixture-store-'));
    try {
      await writeFile(join(root, '.token'), TOKEN);
      const fs = fixtureFs(plugin!, { 'fixture.root': root, 'fixture.token': TOKEN });
      const err = await fs.open(new URL('fixture:///.token'), { signal: AbortSignal.timeout(10_000) }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'GW_FETCH_URI_INVALID' });
      const outside = await fs.stat(new URL('fixture:///x%2F..%2F..%2Fpasswd'), AbortSignal.timeout(10_000)).catch((e: unknown) => e);
      expect(outside).toMatchObject({ code: 'GW_FETCH_URI_INVALID' });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
