import { entryClassProblem } from '../../../src/submission/entry-class-policy';
import { manifestEntryClass } from '../../../src/artifacts/jar-entry-points';
import { forwardedConfiguration } from '../../../src/submission/forwarded-config';

const jar = {
  classes: new Set([
    'com.example.Main',
    'com.example.Main$Inner',
    'org.apache.flink.client.cli.CliFrontend',
    'org.apache.flink.streaming.examples.wordcount.WordCount',
  ]),
};

describe("fetched-only: the entry class must be the jar's own", () => {
  it.each([
    ['com.example.Main', undefined],
    [' com.example.Main ', undefined],
    ['com.example.Main$Inner', undefined],
    ['org.apache.flink.streaming.examples.wordcount.WordCount', undefined],
    ['com.example.Other', /not a class of the fetched jar/],
    ['org.apache.flink.client.cli.CliFrontend', /under org\.apache\.flink/],
    ['java.lang.Runtime', /under java/],
    ['sun.tools.jar.Main', /under sun/],
    ['dev.flinkjargateway.tokens.GatewayTokens', /under dev\.flinkjargateway/],
    ['com/example/Main', /not a class/],
  ])('%s', (cls, expected) => {
    const p = entryClassProblem(cls, jar);
    if (expected === undefined) expect(p).toBeUndefined();
    else expect(p).toMatch(expected);
  });

  it("checks the manifest's entry class when the request names none, and fails closed on an unread manifest", () => {
    expect(entryClassProblem(undefined, { ...jar, manifestEntryClass: 'com.example.Main' })).toBeUndefined();
    expect(entryClassProblem(undefined, { ...jar, manifestEntryClass: 'org.apache.flink.client.cli.CliFrontend' })).toMatch(/manifest/);
    expect(entryClassProblem('', { ...jar, manifestEntryClass: 'com.example.Gone' })).toMatch(/not a class/);
    expect(entryClassProblem(undefined, { ...jar, manifestUnread: true })).toMatch(/manifest could not be read/);
  });

  it('reads program-class before Main-Class, with continuation lines, from the main section only', () => {
    expect(manifestEntryClass('Manifest-Version: 1.0\r\nMain-Class: a.B\r\nprogram-class: c.D\r\n')).toBe('c.D');
    expect(manifestEntryClass('Main-Class: com.example.very.long.packag\n e.Main\n')).toBe('com.example.very.long.package.Main');
    expect(manifestEntryClass('Manifest-Version: 1.0\n\nName: x\nMain-Class: evil.X\n')).toBeUndefined();
  });
});

describe('forwarded configuration', () => {
  const requested = {
    'pipeline.classpaths': 'http://127.0.0.1:1/evil.jar',
    'pipeline.jars': 'file:///tmp/x.jar',
    'pipeline.cached-files': 'name:x,path:file:///x.jar',
    'classloader.parent-first-patterns.additional': 'dev.flinkjargateway.tokens.',
    'classloader.resolve-order': 'parent-first',
    'python.executable': '/bin/sh',
    'user.artifacts.job-jar': 'https://x/a.jar',
    'user.artifacts.artifact-list': 'https://x/b.jar',
    'gateway.artifact.sha256': 'forged',
    '$internal.pipeline.job-id': '0123456789abcdef0123456789abcdef',
    '$internal.deployment.config-dir': '/etc',
    'parallelism.default': '2',
    'security.delegation.job.azure-blob.containers': 'a',
  };

  it("fetched-only drops code-loading keys, the gateway's namespaces and internal keys but the job id", () => {
    const f = forwardedConfiguration(requested, 'fetched-only');
    expect(Object.keys(f.config).sort()).toEqual([
      '$internal.pipeline.job-id',
      'parallelism.default',
      'security.delegation.job.azure-blob.containers',
    ]);
    expect(f.dropped).toHaveLength(10);
  });

  it("open mode drops only the gateway's namespaces and internal keys", () => {
    const f = forwardedConfiguration(requested, 'open');
    expect(f.dropped.sort()).toEqual([
      '$internal.deployment.config-dir',
      'gateway.artifact.sha256',
      'user.artifacts.artifact-list',
      'user.artifacts.job-jar',
    ]);
  });
});
