import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpPlugin } from '../../fs-plugins/http';
import { json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { writePaddedJar } from '../helpers/padded-jar';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';
import { makeSelfSignedCert } from '../servers/tls';

const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });

describe('remote job jars over HTTPS on the real embedded Flink', () => {
  let origin: HttpOrigin;
  let gw: TestGateway;
  let dir: string;
  let placeholder: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-https-e2e-'));
    const tls = makeSelfSignedCert();
    writeFileSync(join(dir, 'ca.pem'), tls.cert);
    const wordcount = readFileSync(WORDCOUNT_JAR);
    origin = await startHttpOrigin({
      tls,
      files: { '/a/wordcount.jar': wordcount, '/b/wordcount.jar': wordcount, '/c/wordcount.jar': wordcount },
    });
    gw = await startGateway(
      flinkUrl(),
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
        'gateway.artifacts.ca-bundle': join(dir, 'ca.pem'),
      },
      [httpPlugin],
    );
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    placeholder = String(up.body.filename).split('/').pop()!;
  }, 60_000);

  afterAll(async () => {
    await json('DELETE', `${gw.url}/v1/jars/${placeholder}`);
    await gw?.close();
    await origin?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const run = (uri: string, jobId = newJobId()) =>
    json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      jobId,
      programArgsList: [],
      flinkConfiguration: { 'user.artifacts.job-jar': uri },
    }).then((r) => ({ ...r, jobId }));
  const gets = (path: string) => origin.requests.filter((r) => r.method === 'GET' && r.path === path).length;

  it('runs an HTTPS jar to FINISHED; an unchanged resubmission downloads zero object bytes', async () => {
    const first = await run(`${origin.url}/a/wordcount.jar`);
    expect(first).toMatchObject({ status: 200, body: { jobid: first.jobId } });
    expect(await waitForJobState(gw.url, first.jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect(gets('/a/wordcount.jar')).toBe(1);

    const second = await run(`${origin.url}/a/wordcount.jar`);
    expect(second.status).toBe(200);
    await waitForJobState(gw.url, second.jobId, ['FINISHED']);
    // Revalidated by HEAD (same ETag): no second GET, so no object bytes crossed the network.
    expect(gets('/a/wordcount.jar')).toBe(1);
    const fetches = (await json('GET', `${gw.url}/gateway/v1/fetches`)).body.fetches as { uri: string; phase: string }[];
    expect(fetches.filter((f) => f.uri.endsWith('/a/wordcount.jar')).map((f) => f.phase)).toEqual(['cached', 'done']);
  });

  it('ten concurrent submissions of one URI cause one download', async () => {
    const runs = await Promise.all(Array.from({ length: 10 }, () => run(`${origin.url}/b/wordcount.jar`)));
    for (const r of runs) expect(r).toMatchObject({ status: 200, body: { jobid: r.jobId } });
    expect(gets('/b/wordcount.jar')).toBe(1);
    for (const r of runs) await waitForJobState(gw.url, r.jobId, ['FINISHED', 'FAILED']);
  });

  it('fetch progress is visible, with the query string removed', async () => {
    const r = await json('POST', `${gw.url}/jars/fetch`, { uri: `${origin.url}/c/wordcount.jar?X-Amz-Signature=topsecret` });
    expect(r.status).toBe(200);
    const list = await json('GET', `${gw.url}/gateway/v1/fetches`);
    const rec = (list.body.fetches as { id: string; uri: string }[]).find((f) => f.uri.endsWith('/c/wordcount.jar'))!;
    expect(rec.uri).toBe(`${origin.url}/c/wordcount.jar`);
    const one = await json('GET', `${gw.url}/gateway/v1/fetches/${rec.id}`);
    expect(one.body).toMatchObject({ phase: 'done', bytes: readFileSync(WORDCOUNT_JAR).length, total: readFileSync(WORDCOUNT_JAR).length });
    expect(JSON.stringify([list.body, gw.logs])).not.toContain('topsecret');
    await json('DELETE', `${gw.url}/jars/${String(r.body.filename).split('/').pop()}`);
  });
});

describe('metrics after remote-jar runs', () => {
  it('shows non-zero submission, fetch and cache counters', async () => {
    const tls = makeSelfSignedCert();
    const dir = mkdtempSync(join(tmpdir(), 'gw-metrics-'));
    writeFileSync(join(dir, 'ca.pem'), tls.cert);
    const origin = await startHttpOrigin({ tls, files: { '/m/wordcount.jar': readFileSync(WORDCOUNT_JAR) } });
    const gw = await startGateway(
      flinkUrl(),
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
        'gateway.artifacts.ca-bundle': join(dir, 'ca.pem'),
      },
      [httpPlugin],
    );
    try {
      const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER }]);
      const placeholder = String(up.body.filename).split('/').pop()!;
      for (let i = 0; i < 2; i++) {
        const jobId = newJobId();
        const r = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
          jobId,
          flinkConfiguration: { 'user.artifacts.job-jar': `${origin.url}/m/wordcount.jar` },
        });
        expect(r.status).toBe(200);
        await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED']);
      }
      await json('GET', `${gw.url}/v1/overview`);
      const text = await (await fetch(`${gw.url}/gateway/v1/metrics`)).text();
      const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
      expect(value(/flink_gateway_submissions_total\{source="uri",outcome="accepted"\} (\d+)/)).toBe(2);
      expect(value(/flink_gateway_fetch_bytes_total\{plugin="http"\} (\d+)/)).toBe(readFileSync(WORDCOUNT_JAR).length);
      expect(value(/flink_gateway_cache_lookups_total\{result="hit"\} (\d+)/)).toBe(1);
      expect(value(/flink_gateway_cache_lookups_total\{result="miss"\} (\d+)/)).toBe(1);
      expect(text).toMatch(/flink_gateway_pass_through_duration_seconds_count\{status_class="2xx"\} [1-9]/);
      expect(text).not.toContain(origin.url);
      await json('DELETE', `${gw.url}/jars/${placeholder}`);
    } finally {
      await gw.close();
      await origin.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a large remote jar', () => {
  it('streams a 520 MB jar to the JobManager without memory growing with its size', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-big-jar-'));
    const big = join(dir, 'big.jar');
    const { size } = await writePaddedJar(WORDCOUNT_JAR, big, 520 * 1024 * 1024);
    // The origin runs in its own process, so only the gateway (this process) is measured.
    const child = spawn(process.execPath, [join(__dirname, '..', 'servers', 'file-origin.cjs'), big], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let gw: TestGateway | undefined;
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.setEncoding('utf8').on('data', (d: string) => {
          const m = /FILE_ORIGIN_READY (\S+)/.exec(d);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`origin exited ${code}`)));
      });
      const port = new URL(url).port;
      gw = await startGateway(
        flinkUrl(),
        {
          'web.submit.jar-uri.enable': 'true',
          'gateway.artifacts.allowed-schemes': 'http',
          'user.artifacts.raw-http-enabled': 'true',
          'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${port}`,
          'user.artifacts.max-size': '1 gb',
        },
        [httpPlugin],
      );
      global.gc?.();
      const before = process.memoryUsage().rss;
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
      const r = await json('POST', `${gw.url}/jars/fetch`, { uri: `${url}/big.jar` });
      clearInterval(sampler);
      expect(r.status).toBe(200);
      const rec = gw.gateway.fetches.list()[0]!;
      expect(rec).toMatchObject({ phase: 'done', bytes: size });
      expect(peak - before).toBeLessThan(96 * 1024 * 1024);
      process.stderr.write(`large jar: ${size} bytes fetched, gateway RSS growth ${Math.round((peak - before) / 1048576)} MiB\n`);
      await json('DELETE', `${gw.url}/jars/${String(r.body.filename).split('/').pop()}`);
    } finally {
      await gw?.close();
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
