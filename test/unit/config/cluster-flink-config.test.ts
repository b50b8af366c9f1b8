import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinPlugins } from '../../../fs-plugins';
import { s3Options } from '../../../fs-plugins/s3/options';
import { createRegistry } from '../../../src/composition';
import { readClusterFlinkConfig } from '../../../src/config/cluster-flink-config';
import { loadRaw, parseArgs } from '../../../src/config/load';
import { coreOptions } from '../../../src/config/options';
import { artifactOptions } from '../../../src/artifacts/options';

/**
 * Fidelity item 11: the gateway reads the cluster's own Flink configuration (the JobManager's
 * config.yaml mounted into the sidecar), so credentials and the jar-URI gate are written once.
 */
describe("the cluster's Flink configuration (gateway.cluster.flink-conf)", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-flink-conf-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  // As the FLIP-613 blog writes a FlinkDeployment's flinkConfiguration (Flink 2.x nests it).
  const CONFIG_YAML = [
    'web:',
    '  submit:',
    '    jar-uri:',
    '      enable: true',
    '  upload:',
    '    dir: /opt/flink/uploads',
    's3:',
    '  access-key: AKIA-CLUSTER',
    '  secret-key: CLUSTER-SECRET',
    '  endpoint: http://127.0.0.1:9000',
    'rest.port: 8082',
    'rest.bind-address: 0.0.0.0',
    'user.artifacts.max-size: 64 mb',
    'user.artifacts.base.dir: /opt/flink/artifacts',
    'pipeline.jars: [file:///a.jar, file:///b.jar]',
    'taskmanager.numberOfTaskSlots: 2',
  ].join('\n');

  const load = (args: string[], env: NodeJS.ProcessEnv = {}) => {
    const registry = createRegistry(builtinPlugins);
    const loaded = loadRaw(registry, parseArgs(args), env);
    return registry.resolve(loaded.raw, loaded.cluster);
  };

  it("takes credentials, the gate and Flink's artifact keys from it; the JobManager's own listener and upload dir stay the JobManager's", () => {
    const file = join(dir, 'config.yaml');
    writeFileSync(file, CONFIG_YAML);
    const config = load([`-Dgateway.cluster.flink-conf=${file}`]);
    expect(config.get(coreOptions.jarUriEnable)).toBe(true);
    expect(config.getOptional(s3Options.accessKey)).toBe('AKIA-CLUSTER');
    expect(config.getOptional(s3Options.secretKey)).toBe('CLUSTER-SECRET');
    expect(config.get(artifactOptions.maxSize)).toBe(64 * 1024 ** 2);
    // rest.port/rest.bind-address are where the JobManager listens; the gateway listens on its own.
    expect(config.get(coreOptions.restPort)).toBe(8081);
    expect(config.get(coreOptions.restBindAddress)).toBe('127.0.0.1');
    // web.upload.dir is a path on the JobManager's filesystem, not necessarily shared with the gateway.
    expect(config.getOptional(coreOptions.jobManagerUploadDir)).toBeUndefined();
    // The cluster's configuration as the JobManager has it, for the jobs' effective configuration.
    expect(config.cluster).toMatchObject({
      'rest.port': '8082',
      'web.upload.dir': '/opt/flink/uploads',
      'pipeline.jars': 'file:///a.jar;file:///b.jar',
      's3.secret-key': 'CLUSTER-SECRET',
    });
    // Flink keys the gateway does not use are reported, not refused.
    expect(config.notices.map((n) => n.key)).toEqual(['user.artifacts.base.dir']);
  });

  it("the gateway's own file, secrets, environment and -D override the cluster's values", () => {
    const file = join(dir, 'config.yaml');
    writeFileSync(file, CONFIG_YAML);
    const own = join(dir, 'gateway.yaml');
    writeFileSync(own, `gateway.cluster.flink-conf: ${file}\ns3.access-key: AKIA-GATEWAY\n`);
    const config = load(['--config', own, '-Duser.artifacts.max-size=32 mb'], { FLINK_GATEWAY_S3_SECRET_KEY: 'GATEWAY-SECRET' });
    expect(config.getOptional(s3Options.accessKey)).toBe('AKIA-GATEWAY');
    expect(config.getOptional(s3Options.secretKey)).toBe('GATEWAY-SECRET');
    expect(config.get(artifactOptions.maxSize)).toBe(32 * 1024 ** 2);
    expect(config.get(coreOptions.jarUriEnable)).toBe(true);
  });

  it("reads Flink 1.x's legacy flink-conf.yaml line by line, as Flink does, and finds the file in a conf directory", () => {
    const conf = join(dir, 'conf');
    mkdirSync(conf);
    writeFileSync(
      join(conf, 'flink-conf.yaml'),
      [
        '# Flink 1.20 legacy file',
        'web.submit.jar-uri.enable: true',
        's3.access-key: AKIA-LEGACY   # trailing comment',
        'not a key value line',
        's3.endpoint: http://127.0.0.1:9000',
        'empty.value: ',
      ].join('\n'),
    );
    expect(readClusterFlinkConfig(conf)).toEqual({
      path: join(conf, 'flink-conf.yaml'),
      entries: new Map([
        ['web.submit.jar-uri.enable', 'true'],
        ['s3.access-key', 'AKIA-LEGACY'],
        ['s3.endpoint', 'http://127.0.0.1:9000'],
      ]),
    });
    writeFileSync(join(conf, 'config.yaml'), 'web.submit.jar-uri.enable: false\n');
    // Like FLINK_CONF_DIR on Flink 1.19+: config.yaml wins over the legacy file.
    expect(readClusterFlinkConfig(conf).path).toBe(join(conf, 'config.yaml'));
    expect(load([`-Dgateway.cluster.flink-conf=${conf}`]).get(coreOptions.jarUriEnable)).toBe(false);
  });

  it('a missing or unreadable file fails start-up naming the option', () => {
    expect(() => load([`-Dgateway.cluster.flink-conf=${join(dir, 'nope.yaml')}`])).toThrow(
      /gateway\.cluster\.flink-conf \(from .*nope\.yaml\): cannot read it: ENOENT/,
    );
    mkdirSync(join(dir, 'empty'));
    expect(() => load([`-Dgateway.cluster.flink-conf=${join(dir, 'empty')}`])).toThrow(/neither config\.yaml nor flink-conf\.yaml/);
    writeFileSync(join(dir, 'bad.yaml'), 'a: [unclosed');
    expect(() => load([`-Dgateway.cluster.flink-conf=${join(dir, 'bad.yaml')}`])).toThrow(/not valid YAML/);
  });

  it("an invalid value in the cluster's file is reported with that file as its source", () => {
    const file = join(dir, 'config.yaml');
    writeFileSync(file, 'user.artifacts.max-size: lots\n');
    expect(() => load([`-Dgateway.cluster.flink-conf=${file}`])).toThrow(
      new RegExp(`user\\.artifacts\\.max-size \\(from cluster Flink configuration ${file.replace(/[.]/g, '\\.')}\\)`),
    );
  });
});
