import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileOptions } from '../../../fs-plugins/file/options';
import { httpOptions } from '../../../fs-plugins/http/options';
import { artifactOptions } from '../../../src/artifacts/options';
import { loadRaw, parseArgs } from '../../../src/config/load';
import { coreOptions } from '../../../src/config/options';
import { OptionsRegistry, type RawEntry } from '../../../src/config/registry';
import type { OptionDef } from '../../../src/config/types';
import { DEPRECATED_JOB_JAR_SHA256_KEY, JOB_JAR_SHA256_KEY, jobJarPin } from '../../../src/submission/run-request';

/**
 * Fidelity item 9: Flink owns `user.artifacts.*`. The gateway keeps FLIP-613's proposed keys and
 * Flink's own there; the keys it invented moved to `gateway.artifacts.*`, their old names kept as
 * deprecated aliases; unknown Flink keys in that namespace are accepted (and reported), not refused.
 */
const defs: OptionDef[] = [
  ...Object.values(coreOptions),
  ...Object.values(artifactOptions),
  ...Object.values(httpOptions),
  ...Object.values(fileOptions),
];
const registry = () => new OptionsRegistry(defs);
const raw = (entries: Record<string, unknown>, source = 'config.yaml') =>
  new Map<string, RawEntry>(Object.entries(entries).map(([k, v]) => [k, { value: v, source }]));

/** Old name → option, with a value that differs from the default. */
const RENAMED: [string, OptionDef, unknown, unknown][] = [
  ['user.artifacts.max-zip-entries', artifactOptions.maxZipEntries, '7', 7],
  ['user.artifacts.max-central-directory-size', artifactOptions.maxCentralDirectorySize, '1 mb', 1024 ** 2],
  ['user.artifacts.max-manifest-size', artifactOptions.maxManifestSize, '2 kb', 2048],
  ['user.artifacts.disallow-restricted-hosts', artifactOptions.disallowRestrictedHosts, 'false', false],
  ['user.artifacts.restricted-hosts.allowed', artifactOptions.restrictedHostsAllowed, '127.0.0.1:9000', ['127.0.0.1:9000']],
  ['user.artifacts.allowed-uris', artifactOptions.allowedUris, 's3://team-a/', ['s3://team-a/']],
  ['user.artifacts.allowed-schemes', artifactOptions.allowedSchemes, 'https;http', ['https', 'http']],
  ['user.artifacts.ca-bundle', artifactOptions.caBundle, '/etc/ca.pem', '/etc/ca.pem'],
  ['user.artifacts.local-file.enabled', fileOptions.enabled, 'true', true],
  ['user.artifacts.local-file.allowed-dirs', fileOptions.allowedDirs, '/jars', ['/jars']],
  ['user.artifacts.http-headers.hosts', httpOptions.headersHosts, 'repo.example.com', ['repo.example.com']],
  ['user.artifacts.http.max-redirects', httpOptions.maxRedirects, '2', 2],
  ['user.artifacts.http.connect-timeout', httpOptions.connectTimeout, '3 s', 3000],
  ['user.artifacts.http.read-timeout', httpOptions.readTimeout, 'PT7S', 7000],
];

describe('option namespaces: Flink owns user.artifacts.*', () => {
  it.each(RENAMED)('%s still works as a deprecated alias, with a notice naming the new key', (old, def, text, parsed) => {
    expect(def.key.startsWith('gateway.artifacts.')).toBe(true);
    expect(def.deprecatedKeys).toEqual([old]);
    const config = registry().resolve(raw({ [old]: text }));
    expect(config.get(def as never)).toEqual(parsed);
    expect(config.notices).toEqual([
      { key: old, source: 'config.yaml', message: `deprecated key; use ${def.key} instead (it means the same)` },
    ]);
  });

  it("keeps FLIP-613's proposed keys and Flink's own keys where they are", () => {
    const kept: OptionDef[] = [
      artifactOptions.fetchTimeout,
      artifactOptions.maxSize,
      artifactOptions.maxConcurrentFetches,
      artifactOptions.baseDir,
      artifactOptions.artifactList,
      httpOptions.rawHttpEnabled,
      httpOptions.headers,
      coreOptions.jarUriEnable,
    ];
    expect(kept.map((d) => d.key)).toEqual([
      'user.artifacts.fetch-timeout',
      'user.artifacts.max-size',
      'user.artifacts.max-concurrent-fetches',
      'user.artifacts.base-dir',
      'user.artifacts.artifact-list',
      'user.artifacts.raw-http-enabled',
      'user.artifacts.http-headers',
      'web.submit.jar-uri.enable',
    ]);
    // Every other gateway option in Flink's namespace would be a key the gateway invented there.
    const invented = defs.filter((d) => d.key.startsWith('user.artifacts.') && !kept.includes(d));
    expect(invented.map((d) => d.key)).toEqual([]);
  });

  it("accepts Flink keys it does not use (1.17's user.artifacts.base.dir, a future FLIP-613 key) and reports them, instead of failing start-up", () => {
    const config = registry().resolve(
      raw({
        'user.artifacts.base.dir': '/opt/flink/artifacts',
        'user.artifacts.http.header': 'X:1',
        'user.artifacts.job-jar.cache': 'true',
      }),
    );
    expect(config.value('user.artifacts.base.dir')).toBe('/opt/flink/artifacts');
    expect(config.notices.map((n) => n.key)).toEqual([
      'user.artifacts.base.dir',
      'user.artifacts.http.header',
      'user.artifacts.job-jar.cache',
    ]);
    expect(config.notices[0]!.message).toMatch(/not an option the gateway uses; kept for Flink and ignored here/);
  });

  it('still refuses an unknown key in the namespace the gateway owns, suggesting the right one', () => {
    expect(() => registry().resolve(raw({ 'gateway.artifacts.max-zip-entrys': '1' }))).toThrow(
      /gateway\.artifacts\.max-zip-entrys \(from config\.yaml\): unknown option; did you mean 'gateway\.artifacts\.max-zip-entries'/,
    );
  });

  it("warns about an unknown web.submit.jar-uri.* key (a newer Flink's, or a typo) instead of failing start-up", () => {
    const config = registry().resolve(raw({ 'web.submit.jar-uri.enabled': 'true', 'web.submit.jar-uri.allowed-schemes': 's3' }));
    expect(config.notices.map((n) => n.key)).toEqual(['web.submit.jar-uri.enabled', 'web.submit.jar-uri.allowed-schemes']);
    expect(config.notices[0]!.message).toMatch(
      /not an option the gateway uses; kept for Flink and ignored here; did you mean 'web\.submit\.jar-uri\.enable'/,
    );
  });

  it('validates a value given under the old name like one under the new name', () => {
    expect(() => registry().resolve(raw({ 'user.artifacts.max-zip-entries': 'many' }))).toThrow(
      /gateway\.artifacts\.max-zip-entries \(from config\.yaml\)/,
    );
  });

  it('within one source the new key wins; a higher source overrides under either name', () => {
    const reg = registry();
    const both = reg.resolve(raw({ 'user.artifacts.max-zip-entries': '7', 'gateway.artifacts.max-zip-entries': '9' }));
    expect(both.get(artifactOptions.maxZipEntries)).toBe(9);
    const dir = join(__dirname, '..', '..', '..', '.tmp');
    const yaml = join(dir, `namespaces-${process.pid}.yaml`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(yaml, 'gateway.artifacts.max-zip-entries: 9\nuser.artifacts.max-zip-entries: 7\n');
    const fromFile = reg.resolve(loadRaw(reg, parseArgs(['--config', yaml]), {}).raw);
    expect(fromFile.get(artifactOptions.maxZipEntries)).toBe(9);
    const overridden = reg.resolve(loadRaw(reg, parseArgs(['--config', yaml, '-Duser.artifacts.max-zip-entries=5']), {}).raw);
    expect(overridden.get(artifactOptions.maxZipEntries)).toBe(5);
    expect(overridden.notices).toEqual([expect.objectContaining({ key: 'user.artifacts.max-zip-entries', source: '-D' })]);
    const fromEnv = reg.resolve(loadRaw(reg, parseArgs(['--config', yaml]), { FLINK_GATEWAY_USER_ARTIFACTS_MAX_ZIP_ENTRIES: '4' }).raw);
    expect(fromEnv.get(artifactOptions.maxZipEntries)).toBe(4);
    rmSync(yaml);
  });

  it("a run request's SHA-256 pin is read under its new key, and under the old one when that is all it has", () => {
    const sha = 'a'.repeat(64);
    expect(JOB_JAR_SHA256_KEY).toBe('gateway.artifacts.job-jar.sha256');
    expect(jobJarPin({ [JOB_JAR_SHA256_KEY]: sha })).toBe(sha);
    expect(jobJarPin({ [DEPRECATED_JOB_JAR_SHA256_KEY]: sha })).toBe(sha);
    expect(jobJarPin({ [DEPRECATED_JOB_JAR_SHA256_KEY]: 'b'.repeat(64), [JOB_JAR_SHA256_KEY]: sha })).toBe(sha);
  });

  it('the configuration reference lists each deprecated key with its option', () => {
    const doc = readFileSync(join(__dirname, '..', '..', '..', 'docs', 'configuration.md'), 'utf8');
    for (const [old, def] of RENAMED) {
      expect(doc).toContain(`| \`${def.key}\` |`);
      expect(doc).toContain(`Deprecated key: \`${old}\``);
    }
  });
});
