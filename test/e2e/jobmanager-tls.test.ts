import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { EmbeddedCluster } from '../../src/cluster/embedded-cluster';
import { projectRoot } from '../../src/project-root';
import { errorCode, json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { startGateway, type TestGateway } from '../helpers/gateway';
import { issueCert, makeTestCa, type CertFiles } from '../servers/tls';

const PASSWORD = 'jm-store-secret';

/**
 * A JobManager whose REST endpoint speaks TLS and requires client certificates
 * (security.ssl.rest.enabled + security.ssl.rest.authentication-enabled), as a real Flink session
 * cluster of its own: the gateway reaches it with gateway.cluster.ca and gateway.cluster.cert/key.
 */
describe('the gateway → JobManager hop over TLS with client certificates (a second real Flink)', () => {
  let dir: string;
  let ca: CertFiles;
  let client: CertFiles;
  let rogueClient: CertFiles;
  let cluster: EmbeddedCluster;
  const gateways: TestGateway[] = [];
  const messages: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-jm-tls-'));
    ca = makeTestCa(dir, 'cluster');
    // RSA: Flink's default security.ssl.algorithms are TLS_ECDHE_RSA_* only.
    // Flink's REST keystore also authenticates Flink's own clients (here: the launcher's readiness
    // probe), so the certificate is for both server and client authentication.
    const server = issueCert(dir, ca, 'jobmanager', { cn: 'jobmanager', use: 'server+client', key: 'rsa' });
    client = issueCert(dir, ca, 'gateway-client', { cn: 'flink-jar-gateway', use: 'client' });
    rogueClient = issueCert(dir, makeTestCa(dir, 'rogue'), 'rogue-client', { cn: 'rogue', use: 'client' });
    const keystore = join(dir, 'jobmanager.p12');
    execFileSync('openssl', [
      'pkcs12',
      '-export',
      '-in',
      server.cert,
      '-inkey',
      server.key,
      '-certfile',
      ca.cert,
      '-name',
      'jobmanager',
      '-out',
      keystore,
      '-passout',
      `pass:${PASSWORD}`,
    ]);
    // Java trusts only certificate entries keytool marks as trusted (openssl 3.0 cannot).
    const truststore = join(dir, 'truststore.p12');
    execFileSync(
      'keytool',
      [
        '-importcert',
        '-noprompt',
        '-alias',
        'cluster-ca',
        '-file',
        ca.cert,
        '-keystore',
        truststore,
        '-storetype',
        'PKCS12',
        '-storepass',
        PASSWORD,
      ],
      { stdio: 'pipe' },
    );
    cluster = await EmbeddedCluster.start({
      rootDir: projectRoot(__dirname),
      jvmOptions: ['-Xmx512m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'],
      slots: 2,
      startupTimeoutMs: 120_000,
      log: pino({ level: 'warn' }),
      flinkConfig: {
        'security.ssl.rest.enabled': 'true',
        'security.ssl.rest.authentication-enabled': 'true',
        'security.ssl.rest.keystore': keystore,
        'security.ssl.rest.keystore-type': 'PKCS12',
        'security.ssl.rest.keystore-password': PASSWORD,
        'security.ssl.rest.key-password': PASSWORD,
        'security.ssl.rest.truststore': truststore,
        'security.ssl.rest.truststore-type': 'PKCS12',
        'security.ssl.rest.truststore-password': PASSWORD,
      },
    });
  }, 180_000);

  afterAll(async () => {
    process.stderr.write(`jobmanager TLS refusals:\n${messages.join('\n')}\n`);
    for (const gw of gateways) await gw.close();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function gateway(options: Record<string, string>, url = cluster.restUrl): Promise<TestGateway> {
    const gw = await startGateway(url, options);
    gateways.push(gw);
    return gw;
  }

  it('the embedded cluster serves https and refuses a client without a certificate', async () => {
    expect(cluster.restUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    // Trusting its CA is not enough: the endpoint wants a client certificate.
    const status = (opts: { cert?: string; key?: string }) =>
      new Promise<number | string>((resolve) => {
        const req = httpsGet(`${cluster.restUrl}/v1/overview`, { ca: readFileSync(ca.cert, 'utf8'), ...opts }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      });
    expect(await status({})).not.toBe(200);
    expect(await status({ cert: readFileSync(client.cert, 'utf8'), key: readFileSync(client.key, 'utf8') })).toBe(200);
  });

  it('with the CA and a client certificate: pass-through, upload, run to FINISHED, delete', async () => {
    const gw = await gateway({ 'gateway.cluster.ca': ca.cert, 'gateway.cluster.cert': client.cert, 'gateway.cluster.key': client.key });
    const overview = await json('GET', `${gw.url}/v1/overview`);
    expect(overview.status).toBe(200);
    expect(overview.body['slots-total']).toBe(2);
    const up = await uploadBytes(gw.url, [{ name: 'WordCount.jar', bytes: readFileSync(WORDCOUNT_JAR) }]);
    expect(up.status).toBe(200);
    const jarId = String(up.body.filename).split('/').pop()!;
    const jobId = newJobId();
    expect(await json('POST', `${gw.url}/v1/jars/${jarId}/run`, { jobId })).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect((await json('DELETE', `${gw.url}/v1/jars/${jarId}`)).status).toBe(200);
  }, 120_000);

  it.each([
    [
      'no gateway.cluster.ca (the JobManager certificate is not trusted)',
      () => ({ 'gateway.cluster.cert': client.cert, 'gateway.cluster.key': client.key }),
      /set gateway\.cluster\.ca/,
    ],
    ['no client certificate', () => ({ 'gateway.cluster.ca': ca.cert }), /set gateway\.cluster\.cert and gateway\.cluster\.key/],
    [
      'a client certificate from another CA',
      () => ({ 'gateway.cluster.ca': ca.cert, 'gateway.cluster.cert': rogueClient.cert, 'gateway.cluster.key': rogueClient.key }),
      /set gateway\.cluster\.cert and gateway\.cluster\.key/,
    ],
    [
      'http:// to the https endpoint (Flink answers with a redirect to itself)',
      () => ({}),
      /gateway\.cluster\.rest-url must use https:\/\//,
    ],
  ])(
    "%s → 502 GW_CLUSTER_TLS in Flink's envelope, naming the setting to fix, on pass-through and on jar routes",
    async (what, options, hint) => {
      const gw = await gateway(options(), what.startsWith('http://') ? cluster.restUrl.replace('https:', 'http:') : cluster.restUrl);
      for (const [method, path] of [
        ['GET', '/v1/overview'],
        ['GET', '/v1/jars'],
      ] as const) {
        const r = await json(method, `${gw.url}${path}`);
        expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 502, code: 'GW_CLUSTER_TLS' });
        expect(r.headers.location).toBeUndefined();
        expect(String((r.body.errors as string[])[0])).toMatch(hint);
        expect(Object.keys(r.body)).toEqual(['errors']);
        messages.push(String((r.body.errors as string[])[0]));
      }
    },
  );

  it('refuses to start with only half a client key pair', async () => {
    await expect(startGateway(cluster.restUrl, { 'gateway.cluster.cert': client.cert })).rejects.toThrow(
      /gateway\.cluster\.cert and gateway\.cluster\.key go together/,
    );
  });
});
