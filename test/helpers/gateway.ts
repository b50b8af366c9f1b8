import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import type { FsPluginDefinition } from '../../src/plugin-kit/fs-plugin';
import { compose, createRegistry, type Gateway, type TokenServices } from '../../src/composition';
import { loadRaw } from '../../src/config/load';
import { createListener } from '../../src/http/listener';

export interface TestGateway {
  url: string;
  gateway: Gateway;
  server: Server;
  /** Log lines the gateway wrote, as parsed JSON (for redaction checks). */
  logs: Record<string, unknown>[];
  /** The audit records written so far (gateway.audit.log goes to a temp file unless given). */
  audit(): Record<string, unknown>[];
  close(): Promise<void>;
}

/** A gateway composed in-process without a listener: for supertest's `request(app)`. */
export interface ComposedGateway {
  app: Gateway['app'];
  gateway: Gateway;
  config: Gateway['config'];
  /** Log lines the gateway wrote, as parsed JSON (for redaction checks). */
  logs: Record<string, unknown>[];
  /** The audit records written so far (gateway.audit.log goes to a temp file unless given). */
  audit(): Record<string, unknown>[];
  close(server?: Server): Promise<void>;
}

/**
 * Composes a gateway in front of `clusterUrl` as main.ts does, without listening, with its own jar
 * cache directory (removed on close) unless `gateway.artifacts.cache-dir` is given. `tokens` are
 * the delegation-token providers and receivers to load (none by default). Jobs the gateway did not
 * register are ignored unless `gateway.tokens.unregistered-jobs` is given. Route-level tests hand
 * `app` to supertest; tests of socket behaviour use `startGateway`.
 */
export async function composeGateway(
  clusterUrl: string,
  options: Record<string, string> = {},
  plugins: readonly FsPluginDefinition[] = [],
  tokens: TokenServices = {},
): Promise<ComposedGateway> {
  const registry = createRegistry(plugins);
  const settings = new Map<string, string>([['gateway.cluster.rest-url', clusterUrl]]);
  const ownCache = options['gateway.artifacts.cache-dir'] === undefined ? mkdtempSync(join(tmpdir(), 'gw-test-cache-')) : undefined;
  if (ownCache) settings.set('gateway.artifacts.cache-dir', ownCache);
  const auditDir = options['gateway.audit.log'] === undefined ? mkdtempSync(join(tmpdir(), 'gw-test-audit-')) : undefined;
  const auditFile = auditDir ? join(auditDir, 'audit.jsonl') : options['gateway.audit.log']!;
  if (auditDir) settings.set('gateway.audit.log', auditFile);
  // The e2e suites share one cluster: a gateway must not register (or cancel) other suites' jobs,
  // so discovery (docs/adr/0010) is on only where a test asks for it.
  settings.set('gateway.tokens.unregistered-jobs', 'ignore');
  for (const [k, v] of Object.entries(options)) settings.set(k, v);
  // As main.ts does, the options given here as -D: the cluster's Flink configuration
  // (gateway.cluster.flink-conf) and secret files (gateway.secrets.dir, re-read on change) below them.
  const resolve = () => {
    const loaded = loadRaw(registry, { dynamic: settings, help: false, printConfigDocs: false, printErrorDocs: false }, {});
    return registry.resolve(loaded.raw, loaded.cluster);
  };
  const config = resolve();
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger: Logger = pino({ level: 'debug' }, sink);
  const gateway = await compose(config, logger, plugins, resolve, tokens);
  return {
    app: gateway.app,
    gateway,
    config,
    logs,
    audit: () =>
      existsSync(auditFile)
        ? readFileSync(auditFile, 'utf8')
            .split('\n')
            .filter((l) => l.trim())
            .map((l) => JSON.parse(l) as Record<string, unknown>)
        : [],
    async close(server?: Server) {
      await gateway.close(server);
      if (ownCache) rmSync(ownCache, { recursive: true, force: true });
      if (auditDir) rmSync(auditDir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts an in-process gateway (`composeGateway`) on 127.0.0.1:0 with the gateway's own listener
 * (main.ts's), for tests of what happens on the socket. With `gateway.tls.cert` or
 * `gateway.tls.keystore` it listens with HTTPS, so `gateway.tls.client-ca` is honoured too, and
 * `url` is https.
 */
export async function startGateway(
  clusterUrl: string,
  options: Record<string, string> = {},
  plugins: readonly FsPluginDefinition[] = [],
  tokens: TokenServices = {},
): Promise<TestGateway> {
  const composed = await composeGateway(clusterUrl, options, plugins, tokens);
  const tls = options['gateway.tls.cert'] !== undefined || options['gateway.tls.keystore'] !== undefined;
  const server = createListener(composed.config, composed.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    gateway: composed.gateway,
    server,
    logs: composed.logs,
    audit: composed.audit,
    async close() {
      server.closeAllConnections();
      await composed.close(server);
    },
  };
}

export function flinkUrl(): string {
  const url = process.env.E2E_FLINK_URL;
  if (!url) throw new Error('the embedded Flink cluster is not running (SKIP_EMBEDDED_FLINK=1?)');
  return url;
}

/**
 * Writes a gateway.auth.tokens-file at `path`: one `<principal> <sha256 of its token>` line per
 * entry of `tokens` (principal name → bearer token). Returns `path`.
 */
export function writeTokensFile(path: string, tokens: Record<string, string>): string {
  writeFileSync(
    path,
    Object.entries(tokens)
      .map(([principal, token]) => `${principal} ${createHash('sha256').update(token).digest('hex')}\n`)
      .join(''),
  );
  return path;
}
