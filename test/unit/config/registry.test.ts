import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { builtinPlugins } from '../../../fs-plugins';
import { createRegistry } from '../../../src/composition';
import { coreOptions } from '../../../src/config/options';
import { envNameFor, loadRaw, parseArgs } from '../../../src/config/load';
import type { RawEntry } from '../../../src/config/registry';
import { parseDuration, parseMemory } from '../../../src/config/types';

const raw = (entries: Record<string, string>) =>
  new Map<string, RawEntry>(Object.entries(entries).map(([k, v]) => [k, { value: v, source: 'test' }]));

describe('options registry', () => {
  it('applies defaults', () => {
    const c = createRegistry().resolve(new Map());
    expect(c.get(coreOptions.restPort)).toBe(8081);
    expect(c.get(coreOptions.restBindAddress)).toBe('127.0.0.1');
    expect(c.get(coreOptions.jarUriEnable)).toBe(false);
    expect(c.getOptional(coreOptions.clusterRestUrl)).toBeUndefined();
  });

  it('reports every problem at once', () => {
    expect(() =>
      createRegistry().resolve(raw({ 'rest.port': 'eighty', 'gateway.upload.max-size': '12 parsecs', 'gateway.clustr.rest-url': 'x' })),
    ).toThrow(
      expect.objectContaining({
        code: 'GW_CONFIG_INVALID',
        problems: expect.arrayContaining([
          expect.objectContaining({ key: 'rest.port' }),
          expect.objectContaining({ key: 'gateway.upload.max-size' }),
          expect.objectContaining({
            key: 'gateway.clustr.rest-url',
            message: expect.stringContaining("did you mean 'gateway.cluster.rest-url'"),
          }),
        ]),
      }),
    );
  });

  it('keeps unknown keys outside its namespaces (a shared Flink config file)', () => {
    const c = createRegistry().resolve(raw({ 'taskmanager.numberOfTaskSlots': '4' }));
    expect(c.value('taskmanager.numberOfTaskSlots')).toBe('4');
  });

  it('parses Flink durations and memory sizes', () => {
    expect(parseDuration('2 min')).toBe(120_000);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('250')).toBe(250);
    expect(parseMemory('1 gb')).toBe(1024 ** 3);
    expect(parseMemory('512m')).toBe(512 * 1024 ** 2);
    expect(() => parseDuration('soon')).toThrow(/not a duration/);
  });

  it('merges defaults < YAML < env < -D and flags sensitive -D keys', () => {
    const dir = join(__dirname, '..', '..', 'fixtures');
    const args = parseArgs(['--config', join(dir, 'gateway.yaml'), '-Drest.port=18081', '-D', 's3.secret-key=abc']);
    const env = { [envNameFor('rest.bind-address')]: '0.0.0.0', [envNameFor('rest.port')]: '9999' };
    const registry = createRegistry();
    const loaded = loadRaw(registry, args, env);
    const c = registry.resolve(loaded.raw);
    expect(c.get(coreOptions.restPort)).toBe(18081);
    expect(c.get(coreOptions.restBindAddress)).toBe('0.0.0.0');
    expect(c.get(coreOptions.uploadMaxSize)).toBe(64 * 1024 ** 2); // from the YAML file
    expect(loaded.sensitiveOnCommandLine).toEqual(['s3.secret-key']);
  });

  it('refuses unknown command-line arguments', () => {
    expect(() => parseArgs(['--port', '1'])).toThrow(/unknown argument/);
  });

  it('keeps docs/configuration.md in step with the registry', () => {
    const docs = readFileSync(join(__dirname, '..', '..', '..', 'docs', 'configuration.md'), 'utf8');
    expect(docs).toBe(createRegistry(builtinPlugins).toMarkdown());
  });
});
