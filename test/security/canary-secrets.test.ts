import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { FormData, getGlobalDispatcher } from 'undici';
import { azurePlugin } from '../../fs-plugins/azure';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { newJobId, waitForJobState, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { makeSas, startAzurite, uploadBlob, type Azurite } from '../servers/azurite';
import { startFakeJobManager, type FakeJobManager } from '../servers/fake-jobmanager';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';
import { fixtureClient, putObject, startS3Server, type S3Server } from '../servers/s3-server';

const hex = (n: number) => randomBytes(n).toString('hex');
const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });

/** Every secret value the gateway is configured with, plus the ones a URI or a request carries. */
const S3_A = { accessKeyId: `AKIACANARYA${hex(5).toUpperCase()}`, secretAccessKey: `canary-s3-secret-a-${hex(12)}` };
const S3_B = { accessKeyId: `AKIACANARYB${hex(5).toUpperCase()}`, secretAccessKey: `canary-s3-secret-b-${hex(12)}` };
const S3_WRONG = { accessKeyId: `AKIACANARYW${hex(5).toUpperCase()}`, secretAccessKey: `canary-s3-secret-w-${hex(12)}` };
const AZ_KEYED = { name: 'canarykeyed', key: randomBytes(64).toString('base64') };
const AZ_SAS = { name: 'canarysas', key: randomBytes(64).toString('base64') };
const AZ_WRONG = { name: 'canarywrong', key: randomBytes(64).toString('base64') };
const AZ_WRONG_CONFIGURED_KEY = randomBytes(64).toString('base64');
const BEARER = `canary-bearer-${hex(12)}`;
const API_KEY = `canary-api-key-${hex(12)}`;
const REQUEST_SECRETS = { s3: `canary-request-s3-${hex(8)}`, azure: `canary-request-az-${hex(8)}`, header: `canary-request-hdr-${hex(8)}` };

/** Everything the gateway said: every response (status line, headers, body). */
const seen: string[] = [];

async function call(method: string, url: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const m = /^(https?:\/\/[^/]+)(\/.*)$/.exec(url)!;
  const res = await getGlobalDispatcher().request({
    origin: m[1]!,
    path: m[2]!,
    method: method as 'GET',
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  const text = await res.body.text();
  seen.push(`${method} ${m[2]} → ${res.statusCode} ${JSON.stringify(res.headers)} ${text}`);
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    parsed = { text };
  }
  return { status: res.statusCode, body: parsed };
}

async function upload(url: string, name: string, bytes: Buffer): Promise<{ status: number; body: Record<string, unknown> }> {
  const form = new FormData();
  form.append('jarfile', new Blob([bytes]), name);
  const res = await getGlobalDispatcher().request({
    origin: new URL(url).origin,
    path: '/v1/jars/upload',
    method: 'POST',
    body: form as never,
  });
  const text = await res.body.text();
  seen.push(`POST /v1/jars/upload → ${res.statusCode} ${JSON.stringify(res.headers)} ${text}`);
  return { status: res.statusCode, body: JSON.parse(text) as Record<string, unknown> };
}

const firstError = (r: { body: Record<string, unknown> }) => String((r.body.errors as string[] | undefined)?.[0] ?? '');
const jarIdOf = (r: { body: Record<string, unknown> }) => String(r.body.filename).split('/').pop()!;

/**
 * Secret hygiene with known canary values for every sensitive option the scenarios use (S3 keys,
 * global and per bucket; an Azure account key; an Azure container SAS; user.artifacts.http-headers),
 * plus secrets carried by jar URIs (a presigned S3 URL, an Azure SAS URL) and by a request's own
 * flinkConfiguration. The main scenarios run against real servers (SigV4-checking S3, Azurite, an
 * HTTP origin, the real embedded Flink): success, wrong credentials, not found, redirects, a run
 * Flink rejects, upload and hand-off errors. No response body or header and no log line may contain
 * any canary, raw or percent-encoded.
 */
describe('canary secrets never appear in responses or logs', () => {
  let s3: S3Server;
  let azurite: Azurite;
  let origin: HttpOrigin;
  let otherOrigin: HttpOrigin;
  let gw: TestGateway;
  let gwHeaders: TestGateway;
  let failingJm: FakeJobManager;
  let gwFailingJm: TestGateway;
  let presigned: string;
  let presignedMissing: string;
  let sasUrl: string;
  let expiredSasUrl: string;
  let containerSas: string;
  const wordcount = readFileSync(WORDCOUNT_JAR);

  beforeAll(async () => {
    [s3, azurite, origin, otherOrigin] = await Promise.all([
      startS3Server({
        keys: { [S3_A.accessKeyId]: S3_A.secretAccessKey, [S3_B.accessKeyId]: S3_B.secretAccessKey },
        policy: { [S3_B.accessKeyId]: ['team-b'] },
        buckets: ['team-a', 'team-b', 'team-c'],
      }),
      startAzurite({ accounts: [AZ_KEYED, AZ_SAS, AZ_WRONG] }),
      startHttpOrigin({ files: { '/app.jar': wordcount }, bearerToken: BEARER }),
      startHttpOrigin({ files: { '/app.jar': wordcount }, bearerToken: `not-${BEARER}` }),
    ]);
    await Promise.all([
      putObject(s3.url, S3_A, 'team-a', 'app.jar', wordcount),
      putObject(s3.url, S3_A, 'team-b', 'app.jar', wordcount),
      putObject(s3.url, S3_A, 'team-c', 'app.jar', wordcount),
      uploadBlob(azurite, AZ_KEYED, 'jars', 'app.jar', wordcount),
      uploadBlob(azurite, AZ_SAS, 'sasjars', 'app.jar', wordcount),
      uploadBlob(azurite, AZ_WRONG, 'jars', 'app.jar', wordcount),
    ]);
    const signer = fixtureClient(s3.url, S3_A);
    presigned = await getSignedUrl(signer, new GetObjectCommand({ Bucket: 'team-a', Key: 'app.jar' }), { expiresIn: 900 });
    presignedMissing = await getSignedUrl(signer, new GetObjectCommand({ Bucket: 'team-a', Key: 'missing.jar' }), { expiresIn: 900 });
    signer.destroy();
    containerSas = makeSas(AZ_SAS, { container: 'sasjars', expiresOn: new Date(Date.now() + 3600_000) });
    sasUrl = `${azurite.blobUrl(AZ_SAS.name)}/sasjars/app.jar?${makeSas(AZ_SAS, { container: 'sasjars', blobName: 'app.jar', expiresOn: new Date(Date.now() + 3600_000) })}`;
    expiredSasUrl = `${azurite.blobUrl(AZ_SAS.name)}/sasjars/app.jar?${makeSas(AZ_SAS, { container: 'sasjars', blobName: 'app.jar', startsOn: new Date(Date.now() - 7200_000), expiresOn: new Date(Date.now() - 3600_000) })}`;
    const options = {
      'web.submit.jar-uri.enable': 'true',
      'gateway.artifacts.allowed-schemes': 'https;http;s3;wasbs',
      'user.artifacts.raw-http-enabled': 'true',
      'gateway.artifacts.restricted-hosts.allowed': [s3.port, azurite.port, origin.port, otherOrigin.port]
        .map((p) => `127.0.0.1:${p}`)
        .join(';'),
      'gateway.artifacts.fetch-retries': '0',
      's3.endpoint': s3.url,
      's3.path.style.access': 'true',
      's3.access-key': S3_A.accessKeyId,
      's3.secret-key': S3_A.secretAccessKey,
      'fs.s3a.bucket.team-b.access.key': S3_B.accessKeyId,
      'fs.s3a.bucket.team-b.secret.key': S3_B.secretAccessKey,
      'fs.s3a.bucket.team-c.access.key': S3_WRONG.accessKeyId,
      'fs.s3a.bucket.team-c.secret.key': S3_WRONG.secretAccessKey,
      [`fs.azure.account.key.${AZ_KEYED.name}.blob.core.windows.net`]: AZ_KEYED.key,
      [`fs.azure.account.endpoint.${AZ_KEYED.name}`]: azurite.blobUrl(AZ_KEYED.name),
      [`fs.azure.sas.sasjars.${AZ_SAS.name}.blob.core.windows.net`]: containerSas,
      [`fs.azure.account.endpoint.${AZ_SAS.name}`]: azurite.blobUrl(AZ_SAS.name),
      [`fs.azure.account.key.${AZ_WRONG.name}.blob.core.windows.net`]: AZ_WRONG_CONFIGURED_KEY,
      [`fs.azure.account.endpoint.${AZ_WRONG.name}`]: azurite.blobUrl(AZ_WRONG.name),
    };
    // user.artifacts.http-headers go to the origin of every http(s) jar URI, so a presigned URL
    // (already signed in its query) cannot be fetched while they are set: S3 refuses two auth
    // mechanisms with 400. The headers get a gateway of their own.
    const headers = {
      'user.artifacts.http-headers': `Authorization:Bearer ${BEARER},X-Api-Key:${API_KEY}`,
      'gateway.artifacts.http-headers.hosts': '127.0.0.1;localhost',
    };
    gw = await startGateway(flinkUrl(), options, [s3Plugin, azurePlugin, httpPlugin]);
    gwHeaders = await startGateway(flinkUrl(), { ...options, ...headers }, [s3Plugin, azurePlugin, httpPlugin]);
    failingJm = await startFakeJobManager();
    failingJm.rejectUploads = { status: 500, message: 'org.apache.flink.runtime.rest.handler.RestHandlerException: upload failed' };
    gwFailingJm = await startGateway(failingJm.url, { ...options, ...headers }, [s3Plugin, azurePlugin, httpPlugin]);
  }, 120_000);

  afterAll(async () => {
    await gw?.close();
    await gwHeaders?.close();
    await gwFailingJm?.close();
    await failingJm?.stop();
    await Promise.all([s3?.stop(), azurite?.stop(), origin?.stop(), otherOrigin?.stop()]);
  });

  const fetchJar = (uri: string, base = gw.url) => call('POST', `${base}/jars/fetch`, { uri });

  it('success: every credential kind fetches (S3 global and per-bucket keys, Azure key and SAS, HTTP headers, presigned and SAS URLs)', async () => {
    const uris = [
      's3://team-a/app.jar',
      's3://team-b/app.jar',
      `wasbs://jars@${AZ_KEYED.name}.blob.core.windows.net/app.jar`,
      `wasbs://sasjars@${AZ_SAS.name}.blob.core.windows.net/app.jar`,
      presigned,
      sasUrl,
    ];
    for (const [uri, base] of [...uris.map((u) => [u, gw.url]), [`${origin.url}/auth/app.jar`, gwHeaders.url]] as [string, string][]) {
      const r = await fetchJar(uri, base);
      expect({ uri: uri.split('?')[0], status: r.status, error: firstError(r) }).toEqual({
        uri: uri.split('?')[0],
        status: 200,
        error: '',
      });
      expect((await call('DELETE', `${base}/jars/${jarIdOf(r)}`)).status).toBe(200);
    }
  });

  it('success: an operator-style run with request-supplied credentials (ignored) reaches FINISHED on the real cluster', async () => {
    const up = await upload(gw.url, 'placeholder.jar', PLACEHOLDER);
    const jobId = newJobId();
    const run = await call('POST', `${gw.url}/v1/jars/${jarIdOf(up)}/run`, {
      entryClass: WORDCOUNT_CLASS,
      jobId,
      flinkConfiguration: {
        'user.artifacts.job-jar': presigned,
        's3.secret-key': REQUEST_SECRETS.s3,
        [`fs.azure.account.key.${AZ_KEYED.name}.blob.core.windows.net`]: REQUEST_SECRETS.azure,
        'user.artifacts.http-headers': `Authorization:Bearer ${REQUEST_SECRETS.header}`,
        'gateway.artifacts.http-headers.hosts': '127.0.0.1;localhost',
      },
    });
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    await call('DELETE', `${gw.url}/v1/jars/${jarIdOf(up)}`);
  });

  it.each([
    ['S3, unknown access key (per bucket)', () => 's3://team-c/app.jar', 'GW_FETCH_DENIED', false],
    ['Azure, wrong account key', () => `wasbs://jars@${AZ_WRONG.name}.blob.core.windows.net/app.jar`, 'GW_FETCH_DENIED', false],
    ['HTTP, wrong bearer token', () => `${otherOrigin.url}/auth/app.jar`, 'GW_FETCH_DENIED', true],
    [
      'presigned URL with a tampered signature',
      () => presigned.replace(/X-Amz-Signature=[0-9a-f]{6}/, 'X-Amz-Signature=000000'),
      'GW_FETCH_DENIED',
      false,
    ],
    ['expired SAS URL', () => expiredSasUrl, 'GW_FETCH_DENIED', false],
  ] as [string, () => string, string, boolean][])('wrong credentials: %s', async (_name, uri, code, headers) => {
    const r = await fetchJar(uri(), headers ? gwHeaders.url : gw.url);
    expect(r.status).toBe(400);
    expect(firstError(r)).toMatch(new RegExp(`^${code}: `));
  });

  it.each([
    ['S3', () => 's3://team-a/missing.jar', false],
    ['S3, per-bucket keys', () => 's3://team-b/missing.jar', false],
    ['Azure, account key', () => `wasbs://jars@${AZ_KEYED.name}.blob.core.windows.net/missing.jar`, false],
    ['Azure, SAS', () => `wasbs://sasjars@${AZ_SAS.name}.blob.core.windows.net/missing.jar`, false],
    ['HTTP with headers', () => `${origin.url}/auth/missing.jar`, true],
    ['presigned URL', () => presignedMissing, false],
  ] as [string, () => string, boolean][])('not found: %s', async (_name, uri, headers) => {
    const r = await fetchJar(uri(), headers ? gwHeaders.url : gw.url);
    expect(r.status).toBe(400);
    expect(firstError(r)).toMatch(/^GW_FETCH_NOT_FOUND: /);
  });

  it('redirects: to a presigned URL on another origin, within the origin, and too many', async () => {
    // From the origin that gets the headers to the S3 server: the headers stay behind, the query signs.
    const toPresigned = await fetchJar(`${origin.url}/to?url=${encodeURIComponent(presigned)}`, gwHeaders.url);
    expect(toPresigned.status).toBe(200);
    const within = await fetchJar(`${origin.url}/redirect/2/auth/app.jar`, gwHeaders.url);
    expect(within.status).toBe(200);
    const tooMany = await fetchJar(`${origin.url}/redirect/9/auth/app.jar?sig=${API_KEY}`, gwHeaders.url);
    expect(firstError(tooMany)).toMatch(/^GW_FETCH_URI_INVALID: /);
    for (const r of [toPresigned, within]) await call('DELETE', `${gwHeaders.url}/jars/${jarIdOf(r)}`);
  });

  it('a run the real cluster rejects (unknown entry class) and a plan it cannot build', async () => {
    const up = await upload(gw.url, 'placeholder.jar', PLACEHOLDER);
    const body = {
      entryClass: 'com.example.DoesNotExist',
      jobId: newJobId(),
      flinkConfiguration: { 'user.artifacts.job-jar': sasUrl, 's3.secret-key': REQUEST_SECRETS.s3 },
    };
    const run = await call('POST', `${gw.url}/v1/jars/${jarIdOf(up)}/run`, body);
    expect(run.status).toBe(400);
    expect(firstError(run)).toMatch(/^GW_(JAR_INVALID|RUN_REJECTED): /);
    const plan = await call('POST', `${gw.url}/v1/jars/${jarIdOf(up)}/plan`, body);
    expect(plan.status).toBe(400);
    await call('DELETE', `${gw.url}/v1/jars/${jarIdOf(up)}`);
  });

  it('upload errors: a non-jar upload, and a JobManager that refuses the hand-off', async () => {
    const bad = await upload(gw.url, 'notajar.jar', Buffer.from(`not a zip ${BEARER.length}`));
    expect(bad.status).toBe(400);
    for (const uri of [
      `${origin.url}/auth/app.jar`,
      's3://team-b/app.jar',
      `wasbs://sasjars@${AZ_SAS.name}.blob.core.windows.net/app.jar`,
    ]) {
      const handoff = await fetchJar(uri, gwFailingJm.url);
      expect(handoff.status).toBeGreaterThanOrEqual(500);
      expect(firstError(handoff)).toMatch(/^GW_CLUSTER_ERROR: /);
    }
  });

  it('status routes: fetch progress, jar list, cluster config pass-through', async () => {
    const list = await call('GET', `${gw.url}/gateway/v1/fetches`);
    expect(list.status).toBe(200);
    for (const f of (list.body.fetches as { id: string }[]).slice(0, 50)) await call('GET', `${gw.url}/gateway/v1/fetches/${f.id}`);
    await call('GET', `${gwFailingJm.url}/gateway/v1/fetches`);
    await call('GET', `${gwHeaders.url}/gateway/v1/fetches`);
    await call('GET', `${gw.url}/jars`);
    await call('GET', `${gw.url}/v1/config`);
  });

  it('no canary in any response (status line, headers, body) or any log line of either gateway', () => {
    const canaries: Record<string, string> = {
      's3.access-key': S3_A.accessKeyId,
      's3.secret-key': S3_A.secretAccessKey,
      'fs.s3a.bucket.team-b.access.key': S3_B.accessKeyId,
      'fs.s3a.bucket.team-b.secret.key': S3_B.secretAccessKey,
      'fs.s3a.bucket.team-c.access.key (wrong)': S3_WRONG.accessKeyId,
      'fs.s3a.bucket.team-c.secret.key (wrong)': S3_WRONG.secretAccessKey,
      'fs.azure.account.key (keyed)': AZ_KEYED.key,
      'fs.azure.account.key (wrong, configured)': AZ_WRONG_CONFIGURED_KEY,
      'Azure account key behind the SAS': AZ_SAS.key,
      'fs.azure.sas (container SAS)': containerSas,
      'container SAS signature': new URLSearchParams(containerSas).get('sig')!,
      'http-headers bearer': BEARER,
      'http-headers api key': API_KEY,
      'presigned URL signature': new URL(presigned).searchParams.get('X-Amz-Signature')!,
      'presigned URL query': new URL(presigned).search.slice(1),
      'SAS URL signature': new URL(sasUrl).searchParams.get('sig')!,
      'expired SAS URL signature': new URL(expiredSasUrl).searchParams.get('sig')!,
      'request s3.secret-key': REQUEST_SECRETS.s3,
      'request Azure key': REQUEST_SECRETS.azure,
      'request http-headers': REQUEST_SECRETS.header,
    };
    const logs = [...gw.logs, ...gwHeaders.logs, ...gwFailingJm.logs];
    // The audit log names URIs and principals: it must hold no credential either.
    const audit = [...gw.audit(), ...gwHeaders.audit(), ...gwFailingJm.audit()];
    const haystack = [...seen, ...logs.map((l) => JSON.stringify(l)), ...audit.map((l) => JSON.stringify(l))].join('\n');
    const found: string[] = [];
    for (const [name, value] of Object.entries(canaries)) {
      for (const form of new Set([value, encodeURIComponent(value)])) if (haystack.includes(form)) found.push(name);
    }
    process.stderr.write(
      `\ncanary summary: ${Object.keys(canaries).length} canaries, ${seen.length} responses and ${logs.length} log lines and ${audit.length} audit lines checked, leaked ${found.length} (must be 0)\n`,
    );
    expect(found).toEqual([]);
    // The checks had something to look at: the scenarios produced error messages and log lines.
    expect(seen.length).toBeGreaterThan(30);
    expect(gw.logs.length).toBeGreaterThan(20);
    expect(audit.length).toBeGreaterThan(10);
  });
});
