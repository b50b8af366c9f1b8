import { Writable } from 'node:stream';
import { OptionsRegistry } from '../../src/config/registry';
import { createLogger } from '../../src/logging';
import { azureOptionList } from '../../fs-plugins/azure/options';

function capture(): { stream: Writable; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { stream, lines };
}

describe('createLogger: redaction comes from the options registry', () => {
  const registry = new OptionsRegistry(azureOptionList);

  it('censors a value logged under a key the registry declares sensitive (templates too), at any depth', () => {
    const { stream, lines } = capture();
    const log = createLogger('info', registry, stream);
    const config = { 'fs.azure.account.key.acct.blob.core.windows.net': 'c2VjcmV0', 'fs.azure.account.auth.type': 'SharedKey' };
    log.info({ config, nested: { inner: { 'fs.azure.account.key.x.dfs.core.windows.net': 'k2' } } }, 'configuration');
    const line = JSON.stringify(lines[0]);
    expect(line).not.toContain('c2VjcmV0');
    expect(line).not.toContain('k2');
    expect((lines[0]!.config as Record<string, string>)['fs.azure.account.key.acct.blob.core.windows.net']).toBe('[redacted]');
    // Not sensitive: logged as it is. The caller's object is not changed.
    expect((lines[0]!.config as Record<string, string>)['fs.azure.account.auth.type']).toBe('SharedKey');
    expect(config['fs.azure.account.key.acct.blob.core.windows.net']).toBe('c2VjcmV0');
  });

  it('keeps the fixed credential paths (authorization headers)', () => {
    const { stream, lines } = capture();
    createLogger('info', registry, stream).info({ headers: { authorization: 'Bearer abc' } }, 'request');
    expect(JSON.stringify(lines[0])).not.toContain('Bearer abc');
  });
});
