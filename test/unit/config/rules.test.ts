import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinPlugins } from '../../../fs-plugins';
import { createRegistry } from '../../../src/composition';
import { ConfigError, OptionsRegistry, type RawEntry } from '../../../src/config/registry';
import type { ConfigRule } from '../../../src/config/registry';
import { option, parseUrl } from '../../../src/config/types';

const raw = (values: Record<string, string>): Map<string, RawEntry> =>
  new Map(Object.entries(values).map(([k, v]) => [k, { value: v, source: 'test' }]));

function problems(registry: OptionsRegistry, values: Record<string, string>, opts?: { files?: boolean }): string[] {
  try {
    registry.resolve(raw(values), new Map(), opts);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems.map((p) => `${p.key} (from ${p.source}): ${p.message}`);
  }
  return [];
}

describe('the url option type', () => {
  it('accepts absolute URLs of the allowed protocols and keeps the text as written', () => {
    expect(parseUrl(' http://127.0.0.1:9000 ')).toBe('http://127.0.0.1:9000');
    expect(parseUrl('https://acct.blob.core.windows.net/path/')).toBe('https://acct.blob.core.windows.net/path/');
    expect(parseUrl('wss://h/x', ['wss:'])).toBe('wss://h/x');
  });

  it.each([
    ['not a url', /'not a url' is not an absolute URL/],
    ['ftp://h/x', /must be a http:\/\/ or https:\/\/ URL, not ftp:\/\//],
    ['localhost:8081', /'localhost:8081' is not an absolute URL \(example: http:\/\/host:port\)/],
    ['https://u:p@h/x', /must not carry user info/],
    ['https://h/x?sig=abc', /must not carry a query string or fragment/],
    ['https://h/x#frag', /must not carry a query string or fragment/],
  ])('refuses %s', (text, message) => {
    expect(() => parseUrl(text)).toThrow(message);
  });

  it('never echoes user info or a sensitive value', () => {
    expect(() => parseUrl('u:secret@@', undefined, false)).toThrow(/^the value is not an absolute URL/);
    expect(() => parseUrl('plain-secret-text', undefined, true)).toThrow(/^the value is not/);
    const registry = new OptionsRegistry(
      [option({ key: 'x.endpoint', type: 'url', sensitive: true, section: 's', description: 'd' })],
      [],
      [],
    );
    expect(problems(registry, { 'x.endpoint': 'no-url-secret' })).toEqual([
      'x.endpoint (from test): invalid value (not shown: the option is sensitive)',
    ]);
  });

  it('is the type of every URL-valued option of the gateway, its plugins and its providers', () => {
    const registry = createRegistry(builtinPlugins);
    const urlKeys = registry
      .all()
      .filter((d) => d.type === 'url')
      .map((d) => d.key)
      .sort();
    expect(urlKeys).toEqual(
      [
        'fs.azure.account.endpoint.<account>',
        'fs.azure.account.oauth2.client.endpoint',
        'fs.azure.account.oauth2.client.endpoint.<account-host>',
        'fs.gs.storage.root.url',
        'fs.gs.token.server.url',
        'gs.storage.root.url',
        'gs.token.server.url',
        'fs.s3a.bucket.<bucket>.endpoint',
        'gateway.cluster.rest-url',
        's3.endpoint',
        'security.delegation.token.provider.azure-blob.endpoint',
        'security.delegation.token.provider.oauth2.token-endpoint',
        'security.delegation.token.provider.s3.endpoint',
      ].sort(),
    );
    // And no string option is named like an endpoint or URL, except Hadoop S3A's, which Hadoop takes as a
    // bare host[:port] too (checked by an s3 plugin rule instead, test/unit/fs-plugins/s3/settings.test.ts).
    expect(
      registry
        .all()
        .filter((d) => d.type === 'string' && /(endpoint|url)$/.test(d.key))
        .map((d) => d.key)
        .sort(),
    ).toEqual(
      [
        'fs.s3a.endpoint',
        's3.assumed.role.sts.endpoint',
        'fs.s3a.assumed.role.sts.endpoint',
        'fs.s3a.bucket.<bucket>.assumed.role.sts.endpoint',
      ].sort(),
    );
  });
});

describe('item checks and rules', () => {
  const a = option({ key: 'p.a', type: 'string', section: 's', description: 'd' });
  const b = option({ key: 'p.b', type: 'string', section: 's', description: 'd' });
  const n = option({
    key: 'p.n',
    type: 'int',
    section: 's',
    description: 'd',
    check: (v: number) => (v % 2 === 0 ? undefined : `${v} is odd`),
  });
  const list = option({
    key: 'p.list',
    type: 'list',
    section: 's',
    description: 'd',
    check: (v: string[]) => v.filter((e) => e.startsWith('-')).map((e) => `'${e}' starts with -`),
  });
  const together: ConfigRule = {
    keys: [a.key, b.key],
    description: 'both or neither.',
    check: (c) =>
      (c.getOptional(a) === undefined) !== (c.getOptional(b) === undefined)
        ? [{ key: c.getOptional(a) === undefined ? a.key : b.key, message: 'goes with the other' }]
        : [],
  };
  const registry = () => new OptionsRegistry([a, b, n, list], [together], []);

  it('reports item checks, one problem per bad entry, with the rules, all at once', () => {
    expect(problems(registry(), { 'p.a': 'x', 'p.n': '3', 'p.list': 'ok;-x;-y' })).toEqual([
      'p.n (from test): 3 is odd',
      "p.list (from test): '-x' starts with -",
      "p.list (from test): '-y' starts with -",
      'p.b (from not set): goes with the other',
    ]);
    expect(problems(registry(), { 'p.a': 'x', 'p.b': 'y', 'p.n': '2' })).toEqual([]);
  });

  it('skips a rule about an option whose value is already refused', () => {
    const parity: ConfigRule = { keys: [n.key], description: 'd', check: () => [{ key: n.key, message: 'rule ran' }] };
    const r = new OptionsRegistry([n], [parity], []);
    expect(problems(r, { 'p.n': 'seven' })).toEqual(["p.n (from test): 'seven' is not an integer"]);
    expect(problems(r, { 'p.n': '3' })).toEqual(['p.n (from test): 3 is odd']);
  });

  it('skips the rules that read files when asked to check values only', () => {
    const file = option({ key: 'p.file', type: 'string', section: 's', description: 'd' });
    const readable: ConfigRule = {
      keys: [file.key],
      description: 'd',
      reads: 'files',
      check: () => [{ key: file.key, message: 'unreadable' }],
    };
    const r = new OptionsRegistry([file], [readable], []);
    expect(problems(r, { 'p.file': '/x' })).toEqual(['p.file (from test): unreadable']);
    expect(problems(r, { 'p.file': '/x' }, { files: false })).toEqual([]);
  });

  it('refuses a rule about an undeclared option (a typo in the rule)', () => {
    expect(() => new OptionsRegistry([a], [{ keys: ['p.typo'], description: 'd', check: () => [] }])).toThrow(
      /names p\.typo, which is not declared/,
    );
  });

  it('lists every rule in docs/configuration.md', () => {
    const md = createRegistry(builtinPlugins).toMarkdown();
    expect(md).toContain('## Rules across options');
    expect(md).toContain('shared-dir needs web.upload.dir');
    expect(md).toContain('`s3.access-key`, `s3.secret-key`');
  });
});

describe("the gateway's rules", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fjg-rules-'));
    writeFileSync(join(dir, 'garbage.pem'), 'not pem\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const registry = createRegistry(builtinPlugins);

  it('a keystore and a cert/key pair are not both set (one would be ignored)', () => {
    const pem = join(dir, 'garbage.pem');
    expect(problems(registry, { 'gateway.tls.keystore': pem, 'gateway.tls.cert': pem, 'gateway.tls.key': pem }, { files: false })).toEqual([
      'gateway.tls.keystore (from test): set either gateway.tls.keystore or gateway.tls.cert/key, not both (one of them would be ignored)',
    ]);
  });

  it('a CA bundle without a certificate is refused (OpenSSL would skip it silently)', () => {
    expect(problems(registry, { 'gateway.artifacts.ca-bundle': join(dir, 'garbage.pem') })).toEqual([
      'gateway.artifacts.ca-bundle (from test): cannot be used: it holds no PEM certificate (-----BEGIN CERTIFICATE-----)',
    ]);
  });

  it('azure-blob user-delegation needs an https endpoint (provider rule)', () => {
    const p = 'security.delegation.token.provider.azure-blob';
    expect(
      problems(registry, {
        [`${p}.auth`]: 'user-delegation',
        [`${p}.account-name`]: 'acct',
        [`${p}.endpoint`]: 'http://127.0.0.1:10000/acct',
      }),
    ).toEqual([`${p}.endpoint (from test): must be https with user-delegation (the bearer token and the key travel on it)`]);
  });

  it('the values of a configuration that passes are untouched', () => {
    const config = registry.resolve(raw({ 'gateway.cluster.rest-url': 'http://127.0.0.1:8082', 's3.endpoint': 'http://127.0.0.1:9000' }));
    expect(config.value('gateway.cluster.rest-url')).toBe('http://127.0.0.1:8082');
    expect(config.value('s3.endpoint')).toBe('http://127.0.0.1:9000');
  });
});

describe('keys of Flink filesystems the gateway has no plugin for', () => {
  it('are start-up warnings naming the key and the scheme, never silence', () => {
    const config = createRegistry(builtinPlugins).resolve(
      raw({ 'fs.oss.endpoint': 'oss.example', 'fs.cosn.userinfo.secretId': 'x', 'fs.s3a.fast.upload': 'true' }),
    );
    expect(config.notices.filter((n) => /no plugin/.test(n.message)).map((n) => n.key)).toEqual([
      'fs.oss.endpoint',
      'fs.cosn.userinfo.secretId',
    ]);
    expect(config.notices.find((n) => n.key === 'fs.oss.endpoint')?.message).toMatch(
      /^a Flink filesystem key for oss:\/\/, which no plugin of this gateway serves: oss:\/\/ jar URIs are refused \(GW_FETCH_SCHEME_UNSUPPORTED\)/,
    );
  });

  it("gs keys are the gs:// plugin's now: the ones it honours are silent, the others a warning naming the key", () => {
    const config = createRegistry(builtinPlugins).resolve(
      raw({
        'gs.auth.type': 'APPLICATION_DEFAULT',
        'fs.gs.project.id': 'p',
        'gs.writer.temporary.bucket.name': 'tmp',
        'fs.gs.requester.pays.mode': 'AUTO',
      }),
    );
    expect(config.notices.filter((n) => /no plugin/.test(n.message))).toEqual([]);
    expect(config.notices.filter((n) => /Google Cloud Storage key/.test(n.message)).map((n) => n.key)).toEqual([
      'gs.writer.temporary.bucket.name',
      'fs.gs.requester.pays.mode',
    ]);
  });
});
