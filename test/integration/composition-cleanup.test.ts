import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FsPluginDefinition } from '../../src/plugin-kit/fs-plugin';
import { compose, createRegistry } from '../../src/composition';
import { loadRaw } from '../../src/config/load';
import { captureLogger, FakeProvider, FakeReceiver } from '../helpers/token-fakes';

/** A start-up that fails half-way releases what it had built, in reverse order. */
describe('the composition root on a failed start-up', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-compose-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a plugin that cannot be created stops start-up; the plugin created before it and the token manager are closed, last made first', async () => {
    const order: string[] = [];
    const ok: FsPluginDefinition = {
      name: 'ok',
      schemes: ['ok'],
      options: [],
      create() {
        order.push('ok created');
        return {
          stat: async () => ({}),
          open: async () => {
            throw new Error('not used');
          },
          supportsRange: false,
          close: async () => {
            order.push('ok closed');
          },
        } as unknown as ReturnType<FsPluginDefinition['create']>;
      },
    };
    const broken: FsPluginDefinition = {
      name: 'broken',
      schemes: ['broken'],
      options: [],
      create() {
        order.push('broken created');
        throw Object.assign(new Error('the broken plugin cannot start'), { code: 'GW_CONFIG_INVALID' });
      },
    };
    const registry = createRegistry([ok, broken]);
    const settings = new Map([
      ['gateway.cluster.rest-url', 'http://127.0.0.1:9'],
      ['gateway.artifacts.cache-dir', join(dir, 'cache')],
      ['gateway.audit.log', join(dir, 'audit.jsonl')],
    ]);
    const config = registry.resolve(
      loadRaw(registry, { dynamic: settings, help: false, printConfigDocs: false, printErrorDocs: false }, {}).raw,
    );
    const provider = new FakeProvider('fake');
    const close = provider.close.bind(provider);
    provider.close = async () => {
      order.push('tokens closed');
      await close();
    };
    const cap = captureLogger();
    await expect(
      compose(config, cap.log, [ok, broken], undefined, { providers: [provider], receivers: [new FakeReceiver('fake')] }),
    ).rejects.toThrow(/broken plugin cannot start/);
    expect(provider.inits).toBe(1);
    expect(provider.closes).toBe(1);
    expect(order).toEqual(['ok created', 'broken created', 'ok closed', 'tokens closed']);
  });
});
