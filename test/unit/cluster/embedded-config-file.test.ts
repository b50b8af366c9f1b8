import { readFileSync, rmSync, statSync } from 'node:fs';
import { EmbeddedCluster } from '../../../src/cluster/embedded-cluster';

describe('EmbeddedCluster.writeConfigFile (the --config file for extra Flink configuration)', () => {
  it('writes flat key: "value" YAML, mode 0600 in a private directory', () => {
    const { dir, file } = EmbeddedCluster.writeConfigFile({
      'security.delegation.token.provider.gateway.secret-file': '/tmp/a dir/with "quotes": and #hash',
      'security.delegation.token.provider.gateway.poll-interval': '500 ms',
    });
    try {
      expect(readFileSync(file, 'utf8').split('\n').slice(1)).toEqual([
        'security.delegation.token.provider.gateway.secret-file: "/tmp/a dir/with \\"quotes\\": and #hash"',
        'security.delegation.token.provider.gateway.poll-interval: "500 ms"',
        '',
      ]);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a key that could break out of the flat form', () => {
    expect(() => EmbeddedCluster.writeConfigFile({ 'a: b\nc': 'x' })).toThrow(/is not a Flink configuration key/);
  });
});
