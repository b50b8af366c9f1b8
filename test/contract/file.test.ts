import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { filePlugin } from '../../fs-plugins/file';
import { createConnectGuard } from '../../src/net/connect-guard';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { fsPluginContract } from './fs-plugin-contract';
import { randomFile } from './plugin-fixtures';

const LARGE_SIZE = 32 * 1024 * 1024;

/** A file FileSystem built the gateway's way: plugin options → registry → create(ctx). */
function fileFs(settings: Record<string, string>): FileSystem {
  const raw = new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));
  return filePlugin.create({
    config: new OptionsRegistry(filePlugin.options, filePlugin.rules).resolve(raw),
    log: pino({ level: 'silent' }),
    guard: createConnectGuard({ enabled: true, allowed: [] }),
  });
}

const enabledIn = (...dirs: string[]) => ({
  'gateway.artifacts.local-file.enabled': 'true',
  'gateway.artifacts.local-file.allowed-dirs': dirs.join(';'),
});

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  return p.then(
    () => 'resolved',
    (e: unknown) => (e as { code?: string }).code,
  );
}

let root: string;
let jars: string; // the allowed directory
let outside: string; // a sibling that is not allowed
const small = randomBytes(10_000);

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'gw-file-plugin-'));
  jars = join(root, 'jars');
  outside = join(root, 'outside');
  await mkdir(jars);
  await mkdir(outside);
  await writeFile(join(jars, 'small.jar'), small);
  await writeFile(join(outside, 'secret.jar'), 'not yours');
  await symlink(join(outside, 'secret.jar'), join(jars, 'link-out.jar')); // a link leading out
  await symlink(outside, join(jars, 'dir-out')); // a directory link leading out
  await symlink(join(jars, 'small.jar'), join(jars, 'link-in.jar')); // a link staying inside
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

fsPluginContract(
  'file',
  async () => {
    const largeSha = await randomFile(join(jars, 'large.jar'), LARGE_SIZE);
    const fs = fileFs(enabledIn(jars));
    return {
      fs,
      // "Wrong credentials" for local files: allowed-dirs that do not include the fixture directory.
      wrongCredentialsFs: fileFs(enabledIn(outside)),
      guardedFs: fs, // unused: the guard case is skipped below
      small: { uri: pathToFileURL(join(jars, 'small.jar')), content: small },
      large: { uri: pathToFileURL(join(jars, 'large.jar')), size: LARGE_SIZE, sha256: largeSha },
      missing: pathToFileURL(join(jars, 'missing.jar')),
      secrets: [],
      close: async () => {},
    };
  },
  // file:// opens no network connection, so the restricted-host guard has nothing to refuse.
  // A local file has no version to pin a range to: it is read in one stream.
  { guardNotApplicable: true, pinnedRangesNotSupported: true },
);

describe('file plugin: off by default, confined to allowed-dirs', () => {
  const signal = () => AbortSignal.timeout(10_000);

  it('is disabled by default, with a hint naming the option', async () => {
    const fs = fileFs({});
    const uri = pathToFileURL(join(jars, 'small.jar'));
    const err = await fs.stat(uri, signal()).catch((e: unknown) => e as Error & { code: string });
    expect(err).toMatchObject({ code: 'GW_FETCH_SCHEME_UNSUPPORTED' });
    expect((err as Error).message).toContain('gateway.artifacts.local-file.enabled: true');
    expect(await codeOf(fs.open(uri, { signal: signal() }))).toBe('GW_FETCH_SCHEME_UNSUPPORTED');
  });

  it('refuses to start when enabled without allowed-dirs, or with a relative or missing one', () => {
    expect(() => fileFs({ 'gateway.artifacts.local-file.enabled': 'true' })).toThrow(/gateway.artifacts.local-file.allowed-dirs/);
    expect(() => fileFs(enabledIn('relative/jars'))).toThrow(/not an absolute path/);
    expect(() => fileFs(enabledIn(join(root, 'nope')))).toThrow(/cannot be resolved \(ENOENT\)/);
  });

  it('refuses .. traversal out of the allowed directory', async () => {
    const fs = fileFs(enabledIn(jars));
    // The URL parser already folds "..", so the path to check is the folded one.
    for (const raw of [`file://${jars}/../outside/secret.jar`, `file://${jars}/%2e%2e/outside/secret.jar`]) {
      expect(await codeOf(fs.open(new URL(raw), { signal: signal() }))).toBe('GW_FETCH_DENIED');
    }
    // A missing file outside is "denied" as well, never "not found": existence outside cannot be probed.
    expect(await codeOf(fs.stat(pathToFileURL(join(outside, 'nothing.jar')), signal()))).toBe('GW_FETCH_DENIED');
    // An encoded slash cannot smuggle a separator in.
    expect(await codeOf(fs.stat(new URL(`file://${jars}/..%2Foutside%2Fsecret.jar`), signal()))).toBe('GW_FETCH_URI_INVALID');
  });

  it('refuses symbolic links that lead out, follows those that stay inside', async () => {
    const fs = fileFs(enabledIn(jars));
    expect(await codeOf(fs.open(pathToFileURL(join(jars, 'link-out.jar')), { signal: signal() }))).toBe('GW_FETCH_DENIED');
    expect(await codeOf(fs.stat(pathToFileURL(join(jars, 'dir-out', 'secret.jar')), signal()))).toBe('GW_FETCH_DENIED');
    expect(await fs.stat(pathToFileURL(join(jars, 'link-in.jar')), signal())).toMatchObject({ size: small.length });
  });

  it('a directory prefix is not containment (/jars does not allow /jars-other)', async () => {
    await mkdir(`${jars}-other`, { recursive: true });
    await writeFile(join(`${jars}-other`, 'x.jar'), 'x');
    const fs = fileFs(enabledIn(jars));
    expect(await codeOf(fs.stat(pathToFileURL(join(`${jars}-other`, 'x.jar')), signal()))).toBe('GW_FETCH_DENIED');
  });

  it('refuses other hosts and directories', async () => {
    const fs = fileFs(enabledIn(jars));
    expect(await codeOf(fs.stat(new URL(`file://fileserver${jars}/small.jar`), signal()))).toBe('GW_FETCH_URI_INVALID');
    expect(await codeOf(fs.stat(pathToFileURL(jars), signal()))).toBe('GW_FETCH_URI_INVALID');
  });
});
