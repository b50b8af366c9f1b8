import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinPlugins, builtinTokenProviders as builtInTokenProviders } from '../../../fs-plugins';
import { createRegistry } from '../../../src/composition';
import { loadRaw, parseArgs } from '../../../src/config/load';
import { JobRegistrations } from '../../../src/submission/job-registrations';
import { FileRegistrationStore } from '../../../src/submission/registration-store';
import { FLINK_SENSITIVE_KEY_PARTS, isFlinkSensitiveKey, jobSecretRule } from '../../../src/tokens/job-configuration';
import { DefaultTokenManager } from '../../../src/tokens/token-manager';
import { ManualClock } from '../../helpers/manual-clock';
import { captureLogger, FakeProvider, FakeReceiver } from '../../helpers/token-fakes';

const J1 = '11111111111111111111111111111111';

/**
 * Fidelity item 12: a provider sees the job's effective configuration — the cluster's Flink
 * configuration overlaid with the run request's — with every secret removed (declared-sensitive
 * options, and Flink's own sensitive-key rule for the rest), except the keys it declares as its
 * job-request keys; the registration store holds exactly that.
 */
describe('the job configuration a token provider sees', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-jobconf-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("matches Flink's GlobalConfiguration.isSensitive for undeclared keys", () => {
    expect(FLINK_SENSITIVE_KEY_PARTS).toEqual([
      'password',
      'secret',
      'fs.azure.account.key',
      'apikey',
      'api-key',
      'auth-params',
      'service-key',
      'token',
      'basic-auth',
      'jaas.config',
      'http-headers',
    ]);
    for (const key of [
      'db.PASSWORD',
      'fs.s3a.secret.key',
      'my.ApiKey',
      'svc.api-key',
      'pulsar.auth-params',
      'gcs.service-key.json',
      'security.delegation.token.x',
      'http.basic-auth',
      'sasl.jaas.config',
      'user.artifacts.http-headers',
    ]) {
      expect([key, isFlinkSensitiveKey(key)]).toEqual([key, true]);
    }
    for (const key of ['pipeline.name', 'parallelism.default', 'security.delegation.job.s3.role-arn'])
      expect([key, isFlinkSensitiveKey(key)]).toEqual([key, false]);
  });

  it("cluster keys + request keys, no secret from either, a provider's declared job keys kept even under security.delegation.token.*", async () => {
    const clusterFile = join(dir, 'config.yaml');
    writeFileSync(
      clusterFile,
      [
        's3.access-key: AKIA-CLUSTER-1',
        's3.secret-key: CLUSTER-SECRET-2',
        'fs.azure.account.key.acct.blob.core.windows.net: CLUSTER-SECRET-3',
        'fs.s3a.access.key: AKIA-CLUSTER-4',
        'fs.s3a.secret.key: CLUSTER-SECRET-4',
        'my.service.api-key: CLUSTER-SECRET-5',
        'pipeline.name: cluster-default',
        'taskmanager.numberOfTaskSlots: "2"',
        'security.delegation.token.scoped.scope: cluster-default-scope',
      ].join('\n'),
    );
    const registry = createRegistry(builtinPlugins);
    const loaded = loadRaw(registry, parseArgs([`-Dgateway.cluster.flink-conf=${clusterFile}`]), {});
    const config = registry.resolve(loaded.raw, loaded.cluster);
    const cap = captureLogger();
    // A provider whose job key lives under security.delegation.token.* (the old name heuristic dropped it).
    const scoped = new FakeProvider('scoped', ['security.delegation.token.scoped.scope', 's3.secret-key']);
    const tokens = await DefaultTokenManager.create({
      config,
      providers: [scoped],
      receivers: [new FakeReceiver('scoped')],
      log: cap.log,
      clock: new ManualClock(),
    });
    expect(tokens.jobRequestKeys()).toEqual(['security.delegation.token.scoped.scope', 's3.secret-key']);
    const store = new FileRegistrationStore(join(dir, 'store'), cap.log);
    await store.init();
    const regs = new JobRegistrations({
      tokens,
      store,
      isSensitive: jobSecretRule(config.registry, tokens.jobRequestKeys()),
      cluster: config.cluster,
      log: cap.log,
    });

    await regs.register(
      J1,
      {
        'pipeline.name': 'nightly-etl',
        'security.delegation.token.scoped.scope': 'bucket-a/reports',
        'security.delegation.token.other.lease': 'REQUEST-SECRET-6',
        'oauth2.client.password': 'REQUEST-SECRET-7',
        'gateway.artifact.uri': 's3://bucket/app.jar',
      },
      cap.log,
      'token:team-a',
    );

    const expected = {
      'pipeline.name': 'nightly-etl',
      'taskmanager.numberOfTaskSlots': '2',
      'security.delegation.token.scoped.scope': 'bucket-a/reports',
      'gateway.artifact.uri': 's3://bucket/app.jar',
    };
    expect(scoped.registered[0]!.conf).toEqual(expected);
    // A provider cannot claim a declared secret (s3.secret-key) as a "job key".
    expect(scoped.registered[0]!.conf).not.toHaveProperty('s3.secret-key');
    expect(store.get(J1)?.configuration).toEqual(expected);
    expect(readFileSync(store.file, 'utf8')).not.toMatch(/SECRET|AKIA/);
  });

  it("without the cluster's file a provider sees the request's keys alone (as before), by the same rule", async () => {
    const registry = createRegistry(builtinPlugins);
    const config = registry.resolve(new Map());
    const cap = captureLogger();
    const p = new FakeProvider('p', ['security.delegation.token.p.scope']);
    const tokens = await DefaultTokenManager.create({
      config,
      providers: [p],
      receivers: [new FakeReceiver('p')],
      log: cap.log,
      clock: new ManualClock(),
    });
    const regs = new JobRegistrations({
      tokens,
      isSensitive: jobSecretRule(config.registry, tokens.jobRequestKeys()),
      cluster: config.cluster,
      log: cap.log,
    });
    await regs.register(
      J1,
      { 'security.delegation.token.p.scope': 'x', 'a.b': 'c', 'fs.azure.sas.c.acct.blob.core.windows.net': 'sv=1&sig=SECRET' },
      cap.log,
    );
    expect(p.registered[0]!.conf).toEqual({ 'security.delegation.token.p.scope': 'x', 'a.b': 'c' });
  });

  it('the built-in providers declare their job keys', () => {
    const keys = builtInTokenProviders.flatMap((b) => b.create().jobRequestKeys ?? []);
    expect(keys.sort()).toEqual([
      'security.delegation.job.azure-blob.containers',
      'security.delegation.job.oauth2.scope',
      'security.delegation.job.s3.role-arn',
    ]);
  });
});
