import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { lstatSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { ensurePrivateDir, foreignFileProblem } from '../../private-dir';

/**
 * The shared secret between the gateway and the Flink-side token bridge: a file both can read
 * (`gateway.tokens.bridge-secret-file` here, `security.delegation.token.provider.gateway.secret-file`
 * there), never a command-line argument or a configuration value. Created when missing (32 random
 * bytes, base64url, mode 0600, directory 0700); re-read when its size or mtime changes, so it can be
 * rotated by replacing the file.
 */
export class BridgeSecret {
  private digest: Buffer | undefined;
  private seen: { mtimeMs: number; size: number } | undefined;

  private constructor(
    readonly path: string,
    private readonly log: Logger,
  ) {}

  /** Reads the secret file, creating it first when it does not exist. */
  static loadOrCreate(path: string, log: Logger): BridgeSecret {
    const secret = new BridgeSecret(path, log);
    let created = false;
    try {
      ensurePrivateDir(dirname(path), 'the directory of gateway.tokens.bridge-secret-file');
      writeFileSync(path, `${randomBytes(32).toString('base64url')}\n`, { flag: 'wx', mode: 0o600 });
      created = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new Error(`cannot create the token bridge secret file ${path}: ${(err as Error).message}`);
    }
    // A secret someone else planted would let them call the bridge: it must be the gateway's own.
    const planted = foreignFileProblem(lstatSync(path));
    if (planted !== undefined)
      throw new Error(`the token bridge secret file ${path} ${planted}; remove it and the gateway creates a new one`);
    secret.reload(true);
    const mode = statSync(path).mode & 0o777;
    if (created) log.info({ path }, 'token bridge secret file created');
    else if ((mode & 0o077) !== 0) {
      log.warn(
        { path, mode: mode.toString(8) },
        'the token bridge secret file is readable by group or others; restrict it to its owner (chmod 600)',
      );
    }
    return secret;
  }

  /** Whether `presented` (the bearer value) is the secret; constant time. */
  matches(presented: string): boolean {
    this.maybeReload();
    if (!this.digest) return false;
    return timingSafeEqual(this.digest, sha256(presented.trim()));
  }

  private maybeReload(): void {
    try {
      const st = statSync(this.path);
      if (this.seen && st.mtimeMs === this.seen.mtimeMs && st.size === this.seen.size) return;
    } catch {
      // Being replaced right now: keep the previous secret.
      return;
    }
    this.reload(false);
  }

  private reload(initial: boolean): void {
    try {
      const st = statSync(this.path);
      const text = readFileSync(this.path, 'utf8').trim();
      if (!/^[\x21-\x7e]{16,}$/.test(text)) throw new Error('it must hold one line of at least 16 printable ASCII characters');
      this.digest = sha256(text);
      this.seen = { mtimeMs: st.mtimeMs, size: st.size };
    } catch (err) {
      const message = `cannot use the token bridge secret file ${this.path}: ${(err as Error).message}`;
      if (initial) throw new Error(message);
      this.log.error({ path: this.path }, `${message}; keeping the previous secret`);
    }
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
