import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ensurePrivateDir } from '../../src/private-dir';
import { BridgeSecret } from '../../src/tokens/receivers/bridge-secret';

/** The gateway trusts no directory or secret file another user made. */
describe('private directories and secret files', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-private-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const log = pino({ level: 'silent' });

  it('refuses a world-writable directory, a symlink, and (as root) one owned by another user', () => {
    const open = join(dir, 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    expect(() => ensurePrivateDir(open, 'x')).toThrow(/writable by every user/);
    symlinkSync(open, join(dir, 'link'));
    expect(() => ensurePrivateDir(join(dir, 'link'), 'x')).toThrow(/symbolic link/);
    if (process.getuid?.() === 0) {
      const foreign = join(dir, 'foreign');
      mkdirSync(foreign, { mode: 0o700 });
      chownSync(foreign, 65534, 65534);
      expect(() => ensurePrivateDir(foreign, 'x')).toThrow(/owned by uid 65534/);
    }
    expect(() => ensurePrivateDir(join(dir, 'a', 'b'), 'x')).not.toThrow();
  });

  it('refuses a bridge secret another user planted, or one others may rewrite', () => {
    const secrets = join(dir, 'secrets');
    mkdirSync(secrets, { mode: 0o700 });
    const file = join(secrets, 'bridge-secret');
    writeFileSync(file, 'planted-secret-0123456789\n', { mode: 0o666 });
    chmodSync(file, 0o666);
    expect(() => BridgeSecret.loadOrCreate(file, log)).toThrow(/writable by group or others/);
    if (process.getuid?.() === 0) {
      chmodSync(file, 0o600);
      chownSync(file, 65534, 65534);
      expect(() => BridgeSecret.loadOrCreate(file, log)).toThrow(/owned by uid 65534/);
    }
    rmSync(file);
    expect(BridgeSecret.loadOrCreate(file, log).matches('planted-secret-0123456789')).toBe(false);
  });
});
