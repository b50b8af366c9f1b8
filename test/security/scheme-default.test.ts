import { azurePlugin } from '../../fs-plugins/azure';
import { filePlugin } from '../../fs-plugins/file';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { artifactOptions } from '../../src/artifacts/options';
import { createRegistry } from '../../src/composition';
import { errorCode, json } from '../helpers/flink';
import { startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { startFakeJobManager, type FakeJobManager } from '../servers/fake-jobmanager';
import { startTrapListener, type TrapListener } from '../servers/trap-listener';

/**
 * Operator parity of the URI policy (security review round 3): the Flink Kubernetes Operator 1.15
 * allows only https for a FlinkSessionJob's spec.job.jarURI by default
 * (kubernetes.operator.user.artifacts.allowed-schemes), and the gateway, which gets the URIs the
 * operator never validates (user.artifacts.job-jar in flinkConfiguration), allows no more by
 * default: every other scheme is the administrator's explicit choice of which stores the cluster's
 * credentials may read for a caller.
 */

const JAR = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'a/B.class': 'x' });
const PLUGINS = [s3Plugin, azurePlugin, httpPlugin, filePlugin];

it("gateway.artifacts.allowed-schemes defaults to https alone, as the operator's jarURI check does", () => {
  const config = createRegistry(PLUGINS).resolve(new Map());
  expect(config.get(artifactOptions.allowedSchemes)).toEqual(['https']);
});

describe('with every plugin loaded and configured, only https passes the scheme gate by default', () => {
  let trap: TrapListener;
  let jm: FakeJobManager;
  let gw: TestGateway;

  beforeAll(async () => {
    // A store endpoint every plugin may reach (listed as exempt): a scheme that passed the gate would fetch from it.
    trap = await startTrapListener('127.0.0.1', JAR);
    jm = await startFakeJobManager();
    gw = await startGateway(
      jm.url,
      {
        'web.submit.jar-uri.enable': 'true',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.local-file.enabled': 'true',
        'gateway.artifacts.local-file.allowed-dirs': '/tmp',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${trap.port}`,
        'gateway.artifacts.fetch-retries': '0',
        's3.endpoint': trap.url,
        's3.path.style.access': 'true',
        's3.access-key': 'AKIDSCHEMEDEFAULT',
        's3.secret-key': 'scheme-default-secret',
        'fs.azure.account.endpoint.acct': trap.url,
        'fs.azure.account.key.acct.blob.core.windows.net': Buffer.from('scheme-default-key').toString('base64'),
      },
      PLUGINS,
    );
  });
  afterAll(async () => {
    await gw.close();
    await jm.stop();
    await trap.stop();
  });

  it.each([
    ['s3', 's3://bucket/app.jar'],
    ['s3a', 's3a://bucket/app.jar'],
    ['s3p', 's3p://bucket/app.jar'],
    ['wasbs', 'wasbs://jars@acct.blob.core.windows.net/app.jar'],
    ['abfss', 'abfss://jars@acct.dfs.core.windows.net/app.jar'],
    ['http', () => `${trap.url}/app.jar`],
    ['file', 'file:///tmp/app.jar'],
  ] as const)('%s is refused before any connection (400 GW_FETCH_SCHEME_UNSUPPORTED), naming the option', async (scheme, uri) => {
    const r = await json('POST', `${gw.url}/v1/jars/fetch`, { uri: typeof uri === 'function' ? uri() : uri });
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 400, code: 'GW_FETCH_SCHEME_UNSUPPORTED' });
    expect(String((r.body.errors as string[])[0])).toContain('gateway.artifacts.allowed-schemes');
    expect(String((r.body.errors as string[])[0])).toContain(`${scheme}://`);
    expect(trap.accepted).toBe(0);
    expect(jm.jars.size).toBe(0);
  });

  it('https passes the scheme gate (and meets the next one: a restricted host not listed)', async () => {
    const r = await json('POST', `${gw.url}/v1/jars/fetch`, { uri: 'https://127.0.0.9/app.jar' });
    expect(errorCode(r)).toBe('GW_FETCH_RESTRICTED_HOST');
    expect(trap.accepted).toBe(0);
  });
});
