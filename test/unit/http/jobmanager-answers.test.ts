import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { builtinPlugins } from '../../../fs-plugins';
import { createRegistry } from '../../../src/composition';
import {
  decodeAnswer,
  filterConfigurationAnswer,
  flinkSecretRule,
  gatewaySecretRule,
  HIDDEN,
} from '../../../src/http/configuration-filter';
import { answerClassesOf } from '../../../src/http/jobmanager-answers';

const classes = (path: string) => [...answerClassesOf(path)].sort().join('+');

describe('what a JobManager answer can hold, by route', () => {
  it.each([
    // Configuration listings: cluster, per job, per application (Flink 2.3), execution config, environment.
    ['/jobmanager/config', 'configuration'],
    ['/v1/jobmanager/config', 'configuration'],
    ['//v1//jobmanager/config/', 'configuration'],
    ['/v1/jobmanager/%63onfig', 'configuration'],
    ['/%76%31/jobmanager/config', 'configuration'],
    ['/v1/jobmanager/%2563onfig', 'configuration'],
    ['/v1/JobManager/Config', 'configuration'],
    ['/jobs/0123456789abcdef0123456789abcdef/jobmanager/config', 'configuration'],
    ['/v1/applications/0123456789abcdef0123456789abcdef/jobmanager/config', 'configuration'],
    ['/v1/jobs/0123456789abcdef0123456789abcdef/config', 'configuration'],
    ['/v1/jobs/0123456789abcdef0123456789abcdef/checkpoints/config', 'configuration'],
    ['/v1/jobmanager/environment', 'configuration'],
    ['/jobs/0123456789abcdef0123456789abcdef/jobmanager/environment', 'configuration'],
    // What cannot be filtered.
    ['/jobmanager/log', 'diagnostics'],
    ['/v1/jobmanager/logs', 'diagnostics'],
    ['/jobmanager/logs/flink-standalonesession.log', 'diagnostics'],
    ['/jobmanager/stdout', 'diagnostics'],
    ['/v1/jobmanager/thread-dump', 'diagnostics'],
    ['/v1/jobmanager/profiler', 'diagnostics'],
    ['/jobmanager/profiler/cpu.html', 'diagnostics'],
    ['/taskmanagers/tm-1/log', 'diagnostics'],
    ['/v1/taskmanagers/tm-1/logs/taskmanager.log', 'diagnostics'],
    ['/taskmanagers/127.0.0.1%3A1234-abcdef/stdout', 'diagnostics'],
    ['/taskmanagers/tm-1/thread-dump', 'diagnostics'],
    ['/taskmanagers/tm-1/profiler', 'diagnostics'],
    ['/v1/jobs/0123456789abcdef0123456789abcdef/vertices/0123456789abcdef0123456789abcdef/flamegraph', 'diagnostics'],
    ['/v1/jobmanager/%6Cog', 'diagnostics'],
    ['/v1/jobmanager/%256Cogs', 'diagnostics'],
    ['/JOBMANAGER/LOG', 'diagnostics'],
    // State: as Flink shows it.
    ['/config', 'state'],
    ['/v1/config', 'state'],
    ['/v1/jobs/overview', 'state'],
    ['/v1/jobs/0123456789abcdef0123456789abcdef/exceptions', 'state'],
    ['/v1/jobs/0123456789abcdef0123456789abcdef/jobmanager/log-url', 'state'],
    ['/v1/taskmanagers/tm-1', 'state'],
    ['/v1/taskmanagers/tm-1/metrics', 'state'],
    ['/v1/jars', 'state'],
    ['/gateway/v1/health', 'state'],
    ['/', 'state'],
    ['/index.html', 'state'],
  ])('%s → %s', (path, expected) => {
    expect(classes(path)).toBe(expected);
  });

  it('gives a path whose two views differ both classes', () => {
    // Flink's router decodes each segment once more than Netty: %252F is a '/' for the canonical view only.
    expect(classes('/jobmanager%252Fconfig')).toBe('configuration+state');
  });
});

describe("the gateway's sensitivity rule on configuration answers", () => {
  const registry = createRegistry(builtinPlugins);
  const sas = 'sv=2024-08-04&sr=c&sig=canarysig0123456789';
  const cluster = {
    'fs.azure.sas.jars.team.blob.core.windows.net': sas,
    's3.access-key': 'AKIACANARY0123456',
    'parallelism.default': '4',
    'env.java.opts.jobmanager': '-Xmx1g -Dfs.s3a.bucket.b.access.key=canaryjvmkey0123 -Dfile.encoding=UTF-8',
  };
  const config = registry.resolve(
    new Map([['gateway.tls.keystore-password', { value: 'canary-own-secret-0123', source: 'test' }]]),
    new Map(Object.entries(cluster)),
  );
  const rule = gatewaySecretRule(config);

  it("hides registry-sensitive keys (families too) and Flink's list, keeps the rest and the shape", () => {
    const listing = [
      { key: 'fs.azure.sas.jars.team.blob.core.windows.net', value: sas },
      { key: 'fs.azure.sas.other.acct.blob.core.windows.net', value: 'not-known-but-sensitive' },
      { key: 'fs.azure.account.key.acct.dfs.core.windows.net', value: 'k' },
      { key: 's3.access-key', value: 'AKIACANARY0123456' },
      { key: 'FS.S3A.BUCKET.B.SECRET.KEY', value: 'upper' },
      { key: 'my.custom.password', value: 'x' },
      { key: 'some.api-key', value: 'x' },
      { key: 'fs.s3a.access.key', value: 'heuristic' },
      { key: 'parallelism.default', value: '4' },
      { key: 'copied.elsewhere', value: `prefix ${sas} suffix` },
      { key: 'env.java.opts.jobmanager', value: cluster['env.java.opts.jobmanager'] },
      { key: 'rest.port', value: '8081' },
    ];
    const { body, hidden } = filterConfigurationAnswer(listing, rule);
    expect(body).toEqual([
      { key: 'fs.azure.sas.jars.team.blob.core.windows.net', value: HIDDEN },
      { key: 'fs.azure.sas.other.acct.blob.core.windows.net', value: HIDDEN },
      { key: 'fs.azure.account.key.acct.dfs.core.windows.net', value: HIDDEN },
      { key: 's3.access-key', value: HIDDEN },
      { key: 'FS.S3A.BUCKET.B.SECRET.KEY', value: HIDDEN },
      { key: 'my.custom.password', value: HIDDEN },
      { key: 'some.api-key', value: HIDDEN },
      { key: 'fs.s3a.access.key', value: HIDDEN },
      { key: 'parallelism.default', value: '4' },
      { key: 'copied.elsewhere', value: HIDDEN },
      { key: 'env.java.opts.jobmanager', value: `-Xmx1g -Dfs.s3a.bucket.b.access.key=${HIDDEN} -Dfile.encoding=UTF-8` },
      { key: 'rest.port', value: '8081' },
    ]);
    expect(hidden).toBe(10);
  });

  it('hides user configuration by name, JVM -D properties by name and known values anywhere', () => {
    const execConfig = {
      jid: 'j',
      name: 'n',
      'execution-config': {
        'execution-mode': 'PIPELINED',
        'job-parallelism': 1,
        'user-config': { 'db.password': 'hunter2', 'api.token': 7, region: 'eu' },
      },
    };
    expect(filterConfigurationAnswer(execConfig, rule).body).toEqual({
      jid: 'j',
      name: 'n',
      'execution-config': {
        'execution-mode': 'PIPELINED',
        'job-parallelism': 1,
        'user-config': { 'db.password': HIDDEN, 'api.token': HIDDEN, region: 'eu' },
      },
    });
    const environment = {
      jvm: {
        version: '17',
        arch: 'amd64',
        options: ['-Xmx1g', '-Dfs.azure.sas.c.a.blob.core.windows.net=x', '-javaagent:a.jar=canary-own-secret-0123', '-Dlog.file=/x.log'],
      },
      classpath: ['/lib/a.jar'],
    };
    expect(filterConfigurationAnswer(environment, rule).body).toEqual({
      jvm: {
        version: '17',
        arch: 'amd64',
        options: ['-Xmx1g', `-Dfs.azure.sas.c.a.blob.core.windows.net=${HIDDEN}`, HIDDEN, '-Dlog.file=/x.log'],
      },
      classpath: ['/lib/a.jar'],
    });
  });

  it("knows the values of secret keys in the cluster's file and in its own configuration", () => {
    expect(rule.secretValues).toEqual(expect.arrayContaining([sas, 'AKIACANARY0123456', 'canary-own-secret-0123']));
    expect(rule.secretValues).not.toContain('4');
  });

  it("without a configuration: Flink's list and the name heuristic", () => {
    expect(
      filterConfigurationAnswer(
        [
          { key: 's3.secret-key', value: 'x' },
          { key: 'fs.azure.sas.c.a.blob.core.windows.net', value: 'y' },
          { key: 'a', value: 'b' },
        ],
        flinkSecretRule,
      ).body,
    ).toEqual([
      { key: 's3.secret-key', value: HIDDEN },
      { key: 'fs.azure.sas.c.a.blob.core.windows.net', value: HIDDEN },
      { key: 'a', value: 'b' },
    ]);
  });
});

describe('decoding an answer before it is filtered', () => {
  const text = Buffer.from(JSON.stringify([{ key: 'a', value: 'b' }]));

  it.each([
    ['gzip', gzipSync(text)],
    ['x-gzip', gzipSync(text)],
    ['deflate', deflateSync(text)],
    ['deflate', deflateRawSync(text)],
    ['br', brotliCompressSync(text)],
    ['gzip, br', brotliCompressSync(gzipSync(text))],
    ['identity', text],
    [undefined, text],
  ] as [string | undefined, Buffer][])('%s', (coding, bytes) => {
    expect(decodeAnswer(bytes, coding, 1024).toString()).toBe(text.toString());
  });

  it('refuses an unknown coding and one that inflates past the bound', () => {
    expect(() => decodeAnswer(text, 'zstd', 1024)).toThrow(/unknown content coding 'zstd'/);
    expect(() => decodeAnswer(gzipSync(Buffer.alloc(1024 * 1024)), 'gzip', 1024)).toThrow();
  });
});
