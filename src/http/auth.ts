import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { TLSSocket } from 'node:tls';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';
import { GatewayError } from '../errors/gateway-error';
import { isLoopbackAddress } from '../net/loopback';

/**
 * Who is calling. Bearer tokens come from a file of `<principal> <sha256-hex of the token>` lines
 * (tokens are stored hashed; the file is re-read when it changes); mutual TLS yields the client
 * certificate's subject. Health, readiness and `GET /config` (the operator's JobManager startup
 * probe, sent without credentials) stay open.
 */
export interface AuthOptions {
  tokensFile?: string;
  /** True when the listener verifies client certificates (gateway.tls.client-ca is set). */
  mutualTls: boolean;
  /** Re-read the tokens file at most this often (ms). */
  reloadIntervalMs?: number;
  now?: () => number;
  /**
   * gateway.http.max-anonymous-requests: requests without credentials that pass through to the
   * JobManager (GET /config, the operator's probe) in progress at once. Default 16.
   */
  maxAnonymousPassThrough?: number;
  /** Where reloads and a broken tokens file are reported. */
  log?: Logger;
}

const OPEN_ROUTES: readonly { method: string; path: RegExp }[] = [
  { method: 'GET', path: /^\/gateway\/v1\/(health|ready)$/ },
  { method: 'GET', path: /^\/(v1\/)?config\/?$/ },
  // The token bridge authenticates on its own (loopback peer + the bridge secret as bearer token).
  { method: 'GET', path: /^\/gateway\/v1\/tokens\/bridge$/ },
];

interface TokenTable {
  mtimeMs: number;
  size: number;
  byHash: Map<string, string>;
  /** Set while the file is gone or invalid: then no token is accepted. */
  broken?: 'missing' | 'invalid';
}

export function parseTokensFile(text: string, source: string): Map<string, string> {
  const byHash = new Map<string, string>();
  text.split('\n').forEach((line, i) => {
    const l = line.trim();
    if (l === '' || l.startsWith('#')) return;
    const m = /^([A-Za-z0-9._@-]{1,128})\s+(?:sha256:)?([0-9a-fA-F]{64})$/.exec(l);
    if (!m) throw new Error(`${source}:${i + 1}: expected "<principal> <sha256 hex of the token>"`);
    byHash.set(m[2]!.toLowerCase(), m[1]!);
  });
  return byHash;
}

export class Authenticator {
  private anonymousInFlight = 0;
  private table?: TokenTable;
  private checkedAt = -Infinity;

  constructor(private readonly opts: AuthOptions) {
    if (opts.tokensFile) this.reload(true);
  }

  get enabled(): boolean {
    return this.opts.tokensFile !== undefined || this.opts.mutualTls;
  }

  /**
   * Re-reads the tokens file when it changed. Fails closed: a file that is gone or has a bad line
   * accepts no token at all until it is fixed (an error is logged once per change), so removing a
   * line, or the file, always revokes — a broken edit never leaves revoked tokens valid.
   */
  private reload(initial = false): void {
    const file = this.opts.tokensFile!;
    let st: { mtimeMs: number; size: number };
    try {
      st = statSync(file);
    } catch (err) {
      if (initial) throw err;
      if (this.table?.broken !== 'missing')
        this.opts.log?.error({ file }, 'the tokens file is gone: no bearer token is accepted until it is back');
      this.table = { mtimeMs: -1, size: -1, byHash: new Map(), broken: 'missing' };
      return;
    }
    if (!initial && this.table && st.mtimeMs === this.table.mtimeMs && st.size === this.table.size) return;
    try {
      this.table = { mtimeMs: st.mtimeMs, size: st.size, byHash: parseTokensFile(readFileSync(file, 'utf8'), file) };
      if (!initial) this.opts.log?.info({ file, principals: new Set(this.table.byHash.values()).size }, 'tokens file reloaded');
    } catch (err) {
      if (initial) throw err;
      this.table = { mtimeMs: st.mtimeMs, size: st.size, byHash: new Map(), broken: 'invalid' };
      this.opts.log?.error(
        { file, err: (err as Error).message },
        'the tokens file is invalid: no bearer token is accepted until it is fixed',
      );
    }
  }

  /** The principal for a request, or undefined when it carries no valid credential. */
  principalOf(req: Request): string | undefined {
    const socket = req.socket as Partial<TLSSocket>;
    if (this.opts.mutualTls && socket.authorized && typeof socket.getPeerCertificate === 'function') {
      const cert = socket.getPeerCertificate();
      const cn = cert?.subject?.CN;
      if (cn) return `cert:${Array.isArray(cn) ? cn[0] : cn}`;
    }
    const header = req.headers.authorization;
    if (this.opts.tokensFile && typeof header === 'string' && /^Bearer\s+/i.test(header)) {
      const now = (this.opts.now ?? Date.now)();
      if (now - this.checkedAt > (this.opts.reloadIntervalMs ?? 2000)) {
        this.checkedAt = now;
        this.reload();
      }
      const digest = createHash('sha256')
        .update(header.replace(/^Bearer\s+/i, '').trim())
        .digest();
      for (const [hash, principal] of this.table?.byHash ?? []) {
        if (timingSafeEqual(Buffer.from(hash, 'hex'), digest)) return `token:${principal}`;
      }
    }
    return undefined;
  }

  middleware() {
    return (req: Request, res: Response, next: NextFunction): void => {
      const path = req.originalUrl.split('?')[0] ?? '/';
      // Probes and the bridge need no permission either (authorization.ts reads this).
      res.locals.openRoute = OPEN_ROUTES.some((r) => r.method === req.method && r.path.test(path));
      if (!this.enabled) {
        res.locals.principal = 'anonymous';
        next();
        return;
      }
      const principal = this.principalOf(req);
      if (principal) {
        res.locals.principal = principal;
        res.locals.log = res.locals.log?.child({ principal });
        next();
        return;
      }
      if (res.locals.openRoute) {
        res.locals.principal = 'anonymous';
        // Health and readiness answer from the gateway itself; GET /config goes to the JobManager,
        // so anonymous callers get a bounded share of it and cannot starve authenticated ones.
        if (!path.startsWith('/gateway/')) {
          if (this.anonymousInFlight >= (this.opts.maxAnonymousPassThrough ?? 16)) {
            const busy = new GatewayError('GW_GATEWAY_BUSY', {
              what: 'requests without credentials',
              limit: 'gateway.http.max-anonymous-requests',
            });
            busy.headers = { 'retry-after': '1' };
            next(busy);
            return;
          }
          this.anonymousInFlight++;
          res.once('close', () => this.anonymousInFlight--);
        }
        next();
        return;
      }
      const err = new GatewayError('GW_AUTH_REQUIRED');
      err.headers = { 'www-authenticate': 'Bearer realm="flink-jar-gateway"' };
      next(err);
    };
  }
}

/** Start-up rule: a gateway that fetches with the cluster's credentials must not be open to the network. */
export function exposureProblem(bindAddress: string, jarUriEnabled: boolean, authEnabled: boolean): string | undefined {
  if (isLoopbackAddress(bindAddress) || !jarUriEnabled || authEnabled) return undefined;
  return `refusing to start: rest.bind-address is ${bindAddress} (not loopback) with web.submit.jar-uri.enable: true and no authentication; set gateway.auth.tokens-file or gateway.tls.client-ca, or bind 127.0.0.1`;
}

/** The authenticator's options, as configured (bearer tokens from gateway.auth.tokens-file, client certificates). */
export function authOptionsOf(config: Configuration, log: Logger): AuthOptions {
  const tokensFile = config.getOptional(coreOptions.authTokensFile);
  return {
    ...(tokensFile ? { tokensFile } : {}),
    mutualTls: config.getOptional(coreOptions.tlsClientCa) !== undefined,
    maxAnonymousPassThrough: config.get(coreOptions.httpMaxAnonymousRequests),
    log,
  };
}
