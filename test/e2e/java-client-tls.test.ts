import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { newJobId, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { type FlinkClientLine, runOperatorSequence, type SequenceResult } from '../helpers/java-client';
import { type CertFiles, issueCert, makeTestCa } from '../servers/tls';

/**
 * The Flink Kubernetes Operator's REST sequence (test/java-client, Flink's own RestClient and
 * RestClusterClient) against a gateway that serves HTTPS and verifies client certificates. The
 * client is set up as the operator sets it up: the session cluster's configuration turns REST SSL
 * on (`security.ssl.rest.enabled`, `authentication-enabled`, store types PKCS12), and the operator
 * swaps in its own pod's keystore and truststore (OPERATOR_KEYSTORE_PATH, OPERATOR_TRUSTSTORE_PATH,
 * OPERATOR_KEYSTORE_PASSWORD; AbstractFlinkService.getOperatorRestConfig). The operator's identity
 * comes from its own CA, not the one that signed the gateway's server certificate.
 */

const STORE_PASSWORD = 'operator-store-pw';
const GATEWAY_STORE_PASSWORD = 'gateway-store-pw';
/** The session cluster's own REST keystore settings, which the operator must not use (and which reach /run). */
const CLUSTER_SECRET = 'cluster-keystore-secret-789';
const BEARER = 'tok-ci-mtls-42';

interface Pki {
  dir: string;
  gatewayCa: CertFiles;
  operatorCa: CertFiles;
  /** PKCS12 with the gateway's RSA key and certificate (gateway.tls.keystore). */
  gatewayKeystore: string;
  operatorKeystore: string;
  /** PKCS12 truststore holding the gateway CA as a Java trusted-certificate entry. */
  operatorTruststore: string;
  intruder: CertFiles;
  intruderKeystore: string;
}

function pkcs12(dir: string, name: string, cert: CertFiles, ca: CertFiles, password: string): string {
  const out = join(dir, `${name}.p12`);
  execFileSync(
    'openssl',
    [
      'pkcs12',
      '-export',
      '-in',
      cert.cert,
      '-inkey',
      cert.key,
      '-certfile',
      ca.cert,
      '-name',
      name,
      '-out',
      out,
      '-passout',
      `pass:${password}`,
    ],
    { stdio: 'pipe' },
  );
  return out;
}

/**
 * Three CAs: the gateway's (its server certificate), the operator's (its client certificate) and
 * an unrelated one (an intruder's client certificate). openssl 3.0 cannot mark a certificate as
 * trusted for Java (`-jdktrust` is 3.2+), so keytool writes the truststore.
 */
function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), 'gw-java-tls-'));
  const gatewayCa = makeTestCa(dir, 'gateway');
  const operatorCa = makeTestCa(dir, 'operator');
  const rogueCa = makeTestCa(dir, 'rogue');
  // RSA: Flink's default security.ssl.algorithms are TLS_ECDHE_RSA_* only.
  const server = issueCert(dir, gatewayCa, 'gateway', { cn: 'localhost', use: 'server', key: 'rsa' });
  const operator = issueCert(dir, operatorCa, 'operator', { cn: 'flink-operator', use: 'client' });
  const intruder = issueCert(dir, rogueCa, 'intruder', { cn: 'intruder', use: 'client' });
  const operatorTruststore = join(dir, 'operator-truststore.p12');
  execFileSync(
    'keytool',
    [
      '-importcert',
      '-noprompt',
      '-alias',
      'gateway-ca',
      '-file',
      gatewayCa.cert,
      '-keystore',
      operatorTruststore,
      '-storetype',
      'PKCS12',
      '-storepass',
      STORE_PASSWORD,
    ],
    { stdio: 'pipe' },
  );
  return {
    dir,
    gatewayCa,
    operatorCa,
    gatewayKeystore: pkcs12(dir, 'gateway', server, gatewayCa, GATEWAY_STORE_PASSWORD),
    operatorKeystore: pkcs12(dir, 'operator', operator, operatorCa, STORE_PASSWORD),
    operatorTruststore,
    intruder,
    intruderKeystore: pkcs12(dir, 'intruder', intruder, rogueCa, STORE_PASSWORD),
  };
}

/** The session cluster's configuration as it reaches the operator: REST SSL on, the cluster's own stores. */
const CLUSTER_SSL_CONF = [
  'security.ssl.rest.enabled=true',
  'security.ssl.rest.authentication-enabled=true',
  'security.ssl.rest.keystore-type=PKCS12',
  'security.ssl.rest.truststore-type=PKCS12',
  'security.ssl.rest.keystore=/opt/flink/ssl/rest-keystore.p12',
  `security.ssl.rest.keystore-password=${CLUSTER_SECRET}`,
  `security.ssl.rest.key-password=${CLUSTER_SECRET}`,
  'security.ssl.rest.truststore=/opt/flink/ssl/rest-truststore.p12',
  `security.ssl.rest.truststore-password=${CLUSTER_SECRET}`,
].flatMap((kv) => ['--conf', kv]);

function operatorEnv(pki: Pki): NodeJS.ProcessEnv {
  return {
    OPERATOR_KEYSTORE_PATH: pki.operatorKeystore,
    OPERATOR_TRUSTSTORE_PATH: pki.operatorTruststore,
    OPERATOR_KEYSTORE_PASSWORD: STORE_PASSWORD,
  };
}

async function operatorSequence(
  line: FlinkClientLine,
  gw: TestGateway,
  jobId: string,
  extra: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<SequenceResult> {
  return runOperatorSequence(line, ['--url', gw.url, '--jar', WORDCOUNT_JAR, '--job-id', jobId, ...CLUSTER_SSL_CONF, ...extra], env);
}

interface RequestLine {
  method: string;
  path: string;
  status: number;
  principal?: string;
}

/** The request lines (request-context.ts) the gateway logged from index `from` on. */
function requestsSince(gw: TestGateway, from: number): RequestLine[] {
  return gw.logs.slice(from).filter((l) => l.msg === 'request' || l.msg === 'request failed') as unknown as RequestLine[];
}

async function get(url: string, agent: Agent, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const r = await request(url, { dispatcher: agent, headers });
  return { status: r.statusCode, body: await r.body.text() };
}

describe('the operator over mutual TLS: Flink RestClient with security.ssl.rest.* and its own client certificate', () => {
  let pki: Pki;
  let gw: TestGateway;
  let gatewayCaPem: string;

  beforeAll(async () => {
    pki = makePki();
    gatewayCaPem = readFileSync(pki.gatewayCa.cert, 'utf8');
    gw = await startGateway(flinkUrl(), {
      'gateway.tls.keystore': pki.gatewayKeystore,
      'gateway.tls.keystore-password': GATEWAY_STORE_PASSWORD,
      'gateway.tls.client-ca': pki.operatorCa.cert,
    });
  });
  afterAll(async () => {
    await gw?.close();
    if (pki) rmSync(pki.dir, { recursive: true, force: true });
  });

  describe.each(['2.1', '1.20'] as const)('Flink %s client classes', (line) => {
    let out: SequenceResult;
    let logsFrom: number;
    const jobId = newJobId();

    beforeAll(async () => {
      logsFrom = gw.logs.length;
      out = await operatorSequence(line, gw, jobId, [], operatorEnv(pki));
    }, 300_000);

    it("speaks TLS and presents the operator pod's keystore, not the cluster's", () => {
      expect(gw.url).toMatch(/^https:/);
      expect(out.flinkClientVersion).toMatch(new RegExp(`^${line.replace('.', '\\.')}\\.`));
      expect(out).toMatchObject({ restSsl: true, restSslClientKeystore: pki.operatorKeystore });
    });

    it('completes upload, run, run again, overview and delete; the job runs on the real Flink', async () => {
      expect(out.upload).toMatchObject({ ok: true });
      expect(out.run1).toMatchObject({ ok: true, jobid: jobId });
      expect(out.run2).toMatchObject({ ok: true, jobid: jobId });
      expect(out.overview).toMatchObject({ ok: true, listed: true });
      expect(out.delete1).toMatchObject({ ok: true });
      expect(out.delete2).toMatchObject({ ok: false, httpStatus: 400 });
      // Asked of the JobManager directly, not through the gateway.
      await expect(waitForJobState(flinkUrl(), jobId, ['FINISHED'])).resolves.toBe('FINISHED');
    });

    it('authenticates every call by the certificate alone: principal cert:flink-operator, no bearer token', () => {
      const calls = requestsSince(gw, logsFrom);
      expect(calls.map((c) => `${c.method} ${c.path.replace(String(out.upload.jarId), '<jar>')}`)).toEqual([
        'POST /v1/jars/upload',
        'POST /v1/jars/<jar>/run',
        'POST /v1/jars/<jar>/run',
        'GET /v1/jobs/overview',
        'DELETE /v1/jars/<jar>',
        'DELETE /v1/jars/<jar>',
      ]);
      for (const c of calls) expect(c.principal).toBe('cert:flink-operator');
    });

    it("never logs the cluster's keystore passwords that the operator sends inside flinkConfiguration", () => {
      expect(JSON.stringify(gw.logs)).not.toContain(CLUSTER_SECRET);
    });
  });

  it('refuses a client without a certificate with 401 GW_AUTH_REQUIRED (probes stay open)', async () => {
    const agent = new Agent({ connect: { ca: gatewayCaPem } });
    try {
      const r = await get(`${gw.url}/v1/jobs/overview`, agent);
      expect(r.status).toBe(401);
      expect(JSON.parse(r.body)).toEqual({ errors: [expect.stringMatching(/^GW_AUTH_REQUIRED: /)] });
      expect((await get(`${gw.url}/config`, agent)).status).toBe(200);
    } finally {
      await agent.close();
    }
  });

  it('refuses a certificate from a CA it was not told to trust (Node client)', async () => {
    const agent = new Agent({ connect: { ca: gatewayCaPem, cert: readFileSync(pki.intruder.cert), key: readFileSync(pki.intruder.key) } });
    try {
      const r = await get(`${gw.url}/v1/jobs/overview`, agent);
      expect(r.status).toBe(401);
      expect(r.body).toContain('GW_AUTH_REQUIRED');
    } finally {
      await agent.close();
    }
  });

  it("refuses Flink's client with a keystore from another CA, configured the plain Flink way", async () => {
    const from = gw.logs.length;
    const flinkWay = [
      `security.ssl.rest.keystore=${pki.intruderKeystore}`,
      `security.ssl.rest.keystore-password=${STORE_PASSWORD}`,
      `security.ssl.rest.key-password=${STORE_PASSWORD}`,
      `security.ssl.rest.truststore=${pki.operatorTruststore}`,
      `security.ssl.rest.truststore-password=${STORE_PASSWORD}`,
    ].flatMap((kv) => ['--conf', kv]);
    const out = await operatorSequence('2.1', gw, newJobId(), flinkWay);
    expect(out).toMatchObject({ restSsl: true, restSslClientKeystore: pki.intruderKeystore });
    expect(out.upload).toMatchObject({ ok: false, httpStatus: 401, error: expect.stringContaining('GW_AUTH_REQUIRED') });
    expect(out.overview).toMatchObject({ ok: false, httpStatus: 401 });
    const calls = requestsSince(gw, from);
    expect(calls.length).toBeGreaterThan(0);
    for (const c of calls) {
      expect(c.status).toBe(401);
      expect(c.principal).toBeUndefined();
    }
  }, 120_000);
});

describe('mutual TLS and bearer tokens together', () => {
  let pki: Pki;
  let gw: TestGateway;

  beforeAll(async () => {
    pki = makePki();
    writeFileSync(join(pki.dir, 'tokens'), `ci ${createHash('sha256').update(BEARER).digest('hex')}\n`);
    gw = await startGateway(flinkUrl(), {
      'gateway.tls.keystore': pki.gatewayKeystore,
      'gateway.tls.keystore-password': GATEWAY_STORE_PASSWORD,
      'gateway.tls.client-ca': pki.operatorCa.cert,
      'gateway.auth.tokens-file': join(pki.dir, 'tokens'),
    });
  });
  afterAll(async () => {
    await gw?.close();
    if (pki) rmSync(pki.dir, { recursive: true, force: true });
  });

  it('the operator still needs no token: its certificate suffices for the whole sequence', async () => {
    const from = gw.logs.length;
    const jobId = newJobId();
    const out = await operatorSequence('2.1', gw, jobId, [], operatorEnv(pki));
    expect(out.upload).toMatchObject({ ok: true });
    expect(out.run1).toMatchObject({ ok: true, jobid: jobId });
    expect(out.delete1).toMatchObject({ ok: true });
    const principals = new Set(requestsSince(gw, from).map((c) => c.principal));
    expect([...principals]).toEqual(['cert:flink-operator']);
  }, 120_000);

  it('a bearer token works over the same listener without a certificate; neither is 401', async () => {
    const agent = new Agent({ connect: { ca: readFileSync(pki.gatewayCa.cert, 'utf8') } });
    try {
      const from = gw.logs.length;
      expect((await get(`${gw.url}/v1/overview`, agent, { authorization: `Bearer ${BEARER}` })).status).toBe(200);
      expect(requestsSince(gw, from).map((c) => c.principal)).toEqual(['token:ci']);
      expect((await get(`${gw.url}/v1/overview`, agent)).status).toBe(401);
      expect((await get(`${gw.url}/v1/overview`, agent, { authorization: 'Bearer wrong' })).status).toBe(401);
    } finally {
      await agent.close();
    }
  });
});

/**
 * Not the gateway's behaviour but what a deployment must know about Flink's REST client (both
 * checked here because the Kubernetes example depends on them): with Flink's default
 * `security.ssl.algorithms` (TLS_ECDHE_RSA_* only) the gateway's certificate must have an RSA key,
 * and the client does not compare the server certificate's names with the host it dials.
 */
describe("what Flink's REST client asks of the gateway's certificate", () => {
  let pki: Pki;
  const gateways: TestGateway[] = [];

  beforeAll(() => {
    pki = makePki();
  });
  afterAll(async () => {
    for (const gw of gateways) await gw.close();
    if (pki) rmSync(pki.dir, { recursive: true, force: true });
  });

  async function gatewayWith(cert: CertFiles): Promise<TestGateway> {
    const gw = await startGateway(flinkUrl(), {
      'gateway.tls.cert': cert.cert,
      'gateway.tls.key': cert.key,
      'gateway.tls.client-ca': pki.operatorCa.cert,
    });
    gateways.push(gw);
    return gw;
  }

  it("an ECDSA key fails the handshake with Flink's default cipher suites; TLS_ECDHE_ECDSA_* in security.ssl.algorithms fixes it", async () => {
    const gw = await gatewayWith(issueCert(pki.dir, pki.gatewayCa, 'gateway-ec', { cn: 'localhost', use: 'server', key: 'ec' }));
    const from = gw.logs.length;
    // No retries, so the failed handshake of the overview does not take RestClusterClient's 20 attempts.
    const refused = await operatorSequence('2.1', gw, newJobId(), ['--conf', 'rest.retry.max-attempts=0'], operatorEnv(pki));
    expect(refused.upload).toMatchObject({ ok: false, error: expect.stringMatching(/SSLHandshakeException/) });
    expect(requestsSince(gw, from)).toEqual([]);
    const jobId = newJobId();
    const suites = 'security.ssl.algorithms=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256';
    const ok = await operatorSequence('2.1', gw, jobId, ['--conf', suites], operatorEnv(pki));
    expect(ok.upload).toMatchObject({ ok: true });
    expect(ok.run1).toMatchObject({ ok: true, jobid: jobId });
  }, 120_000);

  it('the host name is not checked: a certificate for another name, from the trusted CA, is accepted', async () => {
    const gw = await gatewayWith(
      issueCert(pki.dir, pki.gatewayCa, 'gateway-other-name', {
        cn: 'team-a-session-rest.team-a',
        use: 'server',
        key: 'rsa',
        altNames: 'DNS:team-a-session-rest.team-a',
      }),
    );
    const jobId = newJobId();
    const out = await operatorSequence('2.1', gw, jobId, [], operatorEnv(pki));
    expect(out.upload).toMatchObject({ ok: true });
    expect(out.run1).toMatchObject({ ok: true, jobid: jobId });
  }, 120_000);
});
