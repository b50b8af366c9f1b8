import { Server as HttpsServer } from 'node:https';
import { createListener } from './http/listener';
import type { AddressInfo } from 'node:net';
import { builtinPlugins } from '../fs-plugins';
import type { FsPluginDefinition } from './plugin-kit/fs-plugin';
import { loadThirdPartyPlugins } from './artifacts/plugin-loader';
import { builtInTokenServices, compose, createRegistry, type Gateway } from './composition';
import type { Configuration } from './config/registry';
import { coreOptions } from './config/options';
import { loadRaw, parseArgs } from './config/load';
import { formatValue } from './config/types';
import { errorsMarkdown } from './errors/docs';
import { STARTUP_CODES, type StartupCode } from './errors/startup-codes';
import { createLogger } from './logging';
import { tuneV8, v8Options } from './v8-tuning';

const USAGE = `Usage: flink-jar-gateway [--config <file.yaml>] [-D<key>=<value> ...]

A Flink REST gateway in front of one session cluster. Without gateway.cluster.rest-url it starts an
embedded Flink session cluster (Java 17 + Maven). Options (defaults → YAML → FLINK_GATEWAY_* env → -D):
`;

export async function main(argv: readonly string[]): Promise<number> {
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(argv);
  } catch (err) {
    return failed(err);
  }
  if (args.printErrorDocs) {
    process.stdout.write(errorsMarkdown());
    return 0;
  }
  // Two phases: gateway.plugins.dir is a core option, but the plugins' own options must be in the
  // registry before the configuration is validated. So read the one key first, load the plugins,
  // then build the full registry.
  let plugins: readonly FsPluginDefinition[];
  try {
    plugins = pluginsFor(args);
  } catch (err) {
    return failed(err);
  }
  const registry = createRegistry(plugins);
  if (args.printConfigDocs) {
    process.stdout.write(registry.toMarkdown());
    return 0;
  }
  if (args.help) {
    const lines = registry.all().map((d) => `  ${d.key}  (${d.type}, default ${formatValue(d, d.default)})\n      ${d.description}`);
    process.stdout.write(`${USAGE}\n${lines.join('\n')}\n`);
    return 0;
  }
  let config: Configuration;
  let warnings: string[] = [];
  try {
    const loaded = loadRaw(registry, args, process.env);
    warnings = loaded.sensitiveOnCommandLine;
    config = registry.resolve(loaded.raw, loaded.cluster);
  } catch (err) {
    return failed(err);
  }
  // Before anything that moves bodies is built: V8 reads these flags at every collection.
  if (config.get(v8Options.tuning)) tuneV8();
  const logger = createLogger(config.get(coreOptions.logLevel), registry);
  for (const n of config.notices) logger.warn({ key: n.key, source: n.source }, n.message);
  for (const key of warnings) {
    logger.warn(
      { key },
      'a sensitive option was given with -D and is visible in the process list; use the config file or the environment instead',
    );
  }
  let gateway: Gateway;
  try {
    // The built-in token providers (azure-blob, s3, oauth2), each inactive until configured.
    gateway = await compose(
      config,
      logger,
      plugins,
      () => {
        const reloaded = loadRaw(registry, args, process.env);
        return registry.resolve(reloaded.raw, reloaded.cluster);
      },
      builtInTokenServices(config, logger, plugins),
    );
  } catch (err) {
    // The registry checked the configuration before anything was built; what fails here is run
    // time (the embedded cluster, a provider's first call) unless a cause says otherwise.
    if (startupCode(err) === 'GW_STARTUP_FAILED') logger.fatal({ err }, 'start-up failed');
    return failed(err);
  }
  let server: ReturnType<typeof createListener>;
  try {
    server = createListener(config, gateway.app);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.get(coreOptions.restPort), config.get(coreOptions.restBindAddress), () => resolve());
    });
  } catch (err) {
    logger.fatal({ err: (err as Error).message }, 'cannot listen');
    await gateway.close().catch(() => undefined);
    return failed(err, 'GW_LISTEN_FAILED');
  }
  const addr = server.address() as AddressInfo;
  const url = `${server instanceof HttpsServer ? 'https' : 'http'}://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`;
  gateway.listening(addr, server instanceof HttpsServer);
  logger.info(
    { url, jobManager: gateway.cluster.baseUrl, launched: config.getOptional(coreOptions.clusterRestUrl) === undefined },
    'flink-jar-gateway ready',
  );
  // One line on stdout for scripts and tests, independent of the log level.
  process.stdout.write(`GATEWAY_URL=${url}\n`);

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'draining: no new connections, waiting for requests in flight');
      gateway.close(server).then(
        () => resolve(0),
        (err: unknown) => {
          logger.error({ err }, 'error while stopping');
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/**
 * The start-up code of a failure: the first known code on its cause chain (a provider's
 * `ConfigError` inside `GW_TOKENS_STARTUP` is a configuration problem), else `fallback`.
 */
function startupCode(err: unknown, fallback: StartupCode = 'GW_STARTUP_FAILED'): StartupCode {
  const codes: StartupCode[] = [];
  for (let e: unknown = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && code in STARTUP_CODES) codes.push(code as StartupCode);
  }
  return codes.includes('GW_CONFIG_INVALID') ? 'GW_CONFIG_INVALID' : (codes[0] ?? fallback);
}

/** Prints `flink-jar-gateway: <CODE>: <message>` (a ConfigError adds one line per problem) and returns the exit code. */
function failed(err: unknown, fallback?: StartupCode): number {
  const code = startupCode(err, fallback);
  let e: unknown = err;
  // Print the ConfigError itself when it is a cause: its message is the list of problems.
  while (code === 'GW_CONFIG_INVALID' && (e as { code?: string }).code !== code && (e as { cause?: unknown }).cause)
    e = (e as { cause?: unknown }).cause;
  process.stderr.write(`flink-jar-gateway: ${code}: ${e instanceof Error ? e.message : String(e)}\n`);
  return STARTUP_CODES[code].exit;
}

/** The built-in plugins, plus the third-party ones under gateway.plugins.dir (from YAML, env or -D). */
function pluginsFor(args: ReturnType<typeof parseArgs>): readonly FsPluginDefinition[] {
  const builtinRegistry = createRegistry(builtinPlugins);
  const entry = loadRaw(builtinRegistry, args, process.env).raw.get(coreOptions.pluginsDir.key);
  // Resolve just this key: the rest may name options of plugins not loaded yet.
  const dir = builtinRegistry.resolve(new Map(entry ? [[coreOptions.pluginsDir.key, entry]] : [])).getOptional(coreOptions.pluginsDir);
  if (!dir) return builtinPlugins;
  const thirdParty = loadThirdPartyPlugins(dir, { builtins: builtinPlugins, optionKeys: builtinRegistry.all().map((d) => d.key) });
  return [...builtinPlugins, ...thirdParty];
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    () => process.exit(1),
  );
}
