import { createHash, randomUUID } from 'node:crypto';
import { openAsBlob, readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { FormData, request } from 'undici';
import { fetchError } from '../../src/plugin-kit/fetch-error';
import type { FileSystem, FsPluginDefinition } from '../../src/plugin-kit/fs-plugin';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { json, newJobId, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { assertMatchesSchema, assertMatchesSpec } from '../helpers/openapi';

interface Reply {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, unknown>;
}

/** A multipart upload the way Flink's RestClient (the operator) sends it: `request={}` + `file_0`. */
async function upload(url: string, name: string): Promise<Reply> {
  const form = new FormData();
  form.append('request', '{}');
  form.append('file_0', await openAsBlob(WORDCOUNT_JAR), name);
  const res = await request(url, { method: 'POST', body: form });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown>, headers: res.headers };
}

/** A store in memory (scheme `mem`) holding Flink's WordCount jar, for the remote-jar answers. */
function memoryPlugin(jar: Buffer): FsPluginDefinition {
  const fs: FileSystem = {
    supportsRange: false,
    async stat(uri) {
      if (uri.pathname !== '/WordCount.jar') throw fetchError.notFound(uri, 'no such key');
      return { size: jar.length, etag: 'v1' };
    },
    async open(uri) {
      if (uri.pathname !== '/WordCount.jar') throw fetchError.notFound(uri, 'no such key');
      return { stream: Readable.from([jar]), stat: { size: jar.length, etag: 'v1' } };
    },
    async close() {},
  };
  return { name: 'mem', schemes: ['mem'], options: [], create: () => fs };
}

function jarIdOf(r: Reply): string {
  const filename = String(r.body.filename);
  return filename.substring(filename.lastIndexOf('/') + 1);
}

function expectCode(r: Reply, status: number, code: string): void {
  expect(r.status).toBe(status);
  expect((r.body.errors as string[] | undefined)?.[0]).toMatch(new RegExp(`^${code}: `));
}

describe('real responses of the jar routes match openapi.yaml', () => {
  let gw: TestGateway;
  const jars = new Set<string>();
  const jobs = new Set<string>();

  /** Calls the gateway and checks the response against the spec before handing it back. */
  async function call(method: string, path: string, body?: unknown): Promise<Reply> {
    const r = await json(method, `${gw.url}${path}`, body);
    assertMatchesSpec(method, path, r);
    return r;
  }

  beforeAll(async () => {
    gw = await startGateway(flinkUrl());
  });

  afterAll(async () => {
    // Leave the shared cluster as we found it: no running job of ours, no jar of ours.
    for (const jobId of jobs) {
      const s = await json('GET', `${gw.url}/v1/jobs/${jobId}`);
      if (s.status === 200 && !['FINISHED', 'FAILED', 'CANCELED'].includes(String(s.body.state))) {
        await json('PATCH', `${gw.url}/v1/jobs/${jobId}?mode=cancel`);
        await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED']).catch(() => undefined);
      }
    }
    for (const jarId of jars) await json('DELETE', `${gw.url}/jars/${jarId}`);
    await gw.close();
  });

  it('upload, list, plan, run and delete answer with the documented 200 bodies', async () => {
    const up = await upload(`${gw.url}/v1/jars/upload`, 'WordCount.jar');
    assertMatchesSpec('POST', '/v1/jars/upload', up);
    expect(up.status).toBe(200);
    const jarId = jarIdOf(up);
    jars.add(jarId);

    const list = await call('GET', '/jars');
    expect(list.status).toBe(200);
    expect((list.body.files as { id: string }[]).map((f) => f.id)).toContain(jarId);
    expect((await call('GET', '/v1/jars')).status).toBe(200);

    const planPost = await call('POST', `/v1/jars/${jarId}/plan`, {});
    expect(planPost.status).toBe(200);
    const planGet = await call('GET', `/jars/${jarId}/plan?parallelism=1`);
    expect(planGet.status).toBe(200);

    const jobId = newJobId();
    jobs.add(jobId);
    const runBody = { jobId, programArgsList: [], claimMode: 'NO_CLAIM', flinkConfiguration: { 'parallelism.default': 1 } };
    const run = await call('POST', `/v1/jars/${jarId}/run`, runBody);
    expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
    // A retry (the same request under the same jobId) is answered with the same documented body;
    // another request under that id is the documented 409.
    expect(await call('POST', `/jars/${jarId}/run`, runBody)).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await call('POST', `/jars/${jarId}/run`, { jobId })).toMatchObject({ status: 409 });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');

    const del = await call('DELETE', `/v1/jars/${jarId}`);
    expect(del).toMatchObject({ status: 200, body: {} });
    jars.delete(jarId);
  });

  it('error responses are ErrorResponse envelopes with the documented status', async () => {
    const up = await upload(`${gw.url}/jars/upload`, 'WordCount.jar');
    assertMatchesSpec('POST', '/jars/upload', up);
    const jarId = jarIdOf(up);
    jars.add(jarId);

    // Unknown jar: 400 on delete (as Flink), 400 on run/plan (Flink: 500).
    expectCode(await call('DELETE', '/jars/0000_missing.jar'), 400, 'GW_JAR_NOT_FOUND');
    expectCode(await call('DELETE', '/v1/jars/0000_missing.jar'), 400, 'GW_JAR_NOT_FOUND');
    expectCode(await call('POST', '/v1/jars/0000_missing.jar/run', {}), 400, 'GW_JAR_NOT_FOUND');
    expectCode(await call('POST', '/jars/0000_missing.jar/plan', {}), 400, 'GW_JAR_NOT_FOUND');

    // Malformed run bodies never reach the JobManager.
    expectCode(await call('POST', `/v1/jars/${jarId}/run`, '{"jobId": '), 400, 'GW_REQUEST_MALFORMED');
    expectCode(await call('POST', `/v1/jars/${jarId}/run`, '[]'), 400, 'GW_REQUEST_MALFORMED');
    expectCode(await call('POST', `/jars/${jarId}/run`, { jobId: 'not-a-job-id' }), 400, 'GW_REQUEST_MALFORMED');
    expectCode(await call('POST', `/jars/${jarId}/run`, { parallelism: 'four' }), 400, 'GW_REQUEST_MALFORMED');
    expectCode(await call('POST', `/jars/${jarId}/plan`, { programArgsList: 'a b' }), 400, 'GW_REQUEST_MALFORMED');

    // Remote jars are off by default.
    expectCode(
      await call('POST', `/v1/jars/${jarId}/run`, { flinkConfiguration: { 'user.artifacts.job-jar': 'https://example.invalid/app.jar' } }),
      400,
      'GW_JAR_URI_DISABLED',
    );

    // POST /jars/fetch: the body is checked first, then the feature (off by default).
    expectCode(await call('POST', '/jars/fetch', { uri: 's3://bucket/app.jar' }), 400, 'GW_JAR_URI_DISABLED');
    expectCode(
      await call('POST', '/v1/jars/fetch', { uri: 'https://example.invalid/app.jar', sha256: 'ab'.repeat(32) }),
      400,
      'GW_JAR_URI_DISABLED',
    );
    expectCode(await call('POST', '/v1/jars/fetch', {}), 400, 'GW_REQUEST_MALFORMED');

    // Flink 2.3's run-application, in front of a 2.1 JobManager: not found, as 2.1 answers.
    expectCode(await call('POST', `/v1/jars/${jarId}/run-application`, {}), 404, 'GW_ROUTE_NOT_FOUND');

    // An upload that is not a jar. Sent as one buffer with a Content-Length: the gateway refuses
    // it as soon as it sees the file name and closes the connection, so a client still streaming
    // the rest of the multipart body (undici's FormData does) can get EPIPE instead of the answer.
    const boundary = 'openapi-test-boundary';
    const multipart = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="jarfile"; filename="notes.txt"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--${boundary}--\r\n`,
    );
    const res = await request(`${gw.url}/jars/upload`, {
      method: 'POST',
      body: multipart,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    const notJar = { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown>, headers: res.headers };
    assertMatchesSpec('POST', '/jars/upload', notJar);
    expectCode(notJar, 400, 'GW_UPLOAD_NOT_JAR_NAME');

    // Other methods on the code-running routes are the gateway's 404; other /jars paths are Flink's to answer.
    for (const [method, path] of [
      ['GET', `/jars/${jarId}/run`],
      ['GET', '/jars/upload'],
      ['PUT', `/v1/jars/${jarId}/plan`],
    ] as const) {
      const r = await json(method, `${gw.url}${path}`);
      expectCode(r, 404, 'GW_ROUTE_NOT_FOUND');
      expect(String(r.headers['content-type'])).toMatch(/^application\/json/);
      assertMatchesSchema('ErrorResponse', r.body);
    }
    for (const [method, path] of [
      ['GET', '/jars/a/b/c'],
      ['GET', `/v1/jars/${jarId}`],
      ['PUT', '/jars'],
    ] as const) {
      const r = await json(method, `${gw.url}${path}`);
      expect({ status: r.status, first: String((r.body.errors as string[])[0]) }).toEqual({
        status: 404,
        first: expect.stringMatching(/^(?:Not found: |Unable to load requested file )/),
      });
    }
  });

  it('the gateway routes answer as documented', async () => {
    expect((await call('GET', '/gateway/v1/health')).status).toBe(200);
    expect((await call('GET', '/gateway/v1/ready')).status).toBe(200);
    const fetches = await call('GET', '/gateway/v1/fetches');
    expect(fetches.status).toBe(200);
    expect(Array.isArray(fetches.body.fetches)).toBe(true);
    const unknown = await call('GET', `/gateway/v1/fetches/${randomUUID()}`);
    expectCode(unknown, 404, 'GW_ROUTE_NOT_FOUND');
  });

  it('remote jars (POST /jars/fetch, run/plan by URI, fetch progress) answer as documented', async () => {
    const jar = readFileSync(WORDCOUNT_JAR);
    const sha256 = createHash('sha256').update(jar).digest('hex');
    const remote = await startGateway(flinkUrl(), { 'web.submit.jar-uri.enable': 'true', 'gateway.artifacts.allowed-schemes': 'mem' }, [
      memoryPlugin(jar),
    ]);
    const fetched: string[] = [];
    const rcall = async (method: string, path: string, body?: unknown): Promise<Reply> => {
      const r = await json(method, `${remote.url}${path}`, body);
      assertMatchesSpec(method, path, r);
      return r;
    };
    try {
      const ok = await rcall('POST', '/v1/jars/fetch', { uri: 'mem://bucket/WordCount.jar?token=secret', sha256: sha256.toUpperCase() });
      expect(ok).toMatchObject({ status: 200, body: { status: 'success' } });
      fetched.push(jarIdOf(ok));
      const again = await rcall('POST', '/jars/fetch', { uri: 'mem://bucket/WordCount.jar' });
      expect(again.status).toBe(200);
      fetched.push(jarIdOf(again));

      expectCode(
        await rcall('POST', '/jars/fetch', { uri: 'mem://bucket/WordCount.jar', sha256: '0'.repeat(64) }),
        400,
        'GW_FETCH_DIGEST_MISMATCH',
      );
      expectCode(await rcall('POST', '/jars/fetch', { uri: 'mem://bucket/missing.jar' }), 400, 'GW_FETCH_NOT_FOUND');
      expectCode(await rcall('POST', '/v1/jars/fetch', { uri: 'gopher://h/app.jar' }), 400, 'GW_FETCH_SCHEME_UNSUPPORTED');
      expectCode(await rcall('POST', '/v1/jars/fetch', { uri: 'not a uri' }), 400, 'GW_FETCH_URI_INVALID');

      const plan = await rcall('POST', '/v1/jars/remote.jar/plan', {
        flinkConfiguration: { 'user.artifacts.job-jar': 'mem://bucket/WordCount.jar', 'gateway.artifacts.job-jar.sha256': sha256 },
      });
      expect(plan.status).toBe(200);
      expectCode(
        await rcall('POST', '/jars/remote.jar/run', {
          flinkConfiguration: {
            'user.artifacts.job-jar': 'mem://bucket/WordCount.jar',
            'gateway.artifacts.job-jar.sha256': 'f'.repeat(64),
          },
        }),
        400,
        'GW_FETCH_DIGEST_MISMATCH',
      );

      const list = await rcall('GET', '/gateway/v1/fetches');
      expect(list.status).toBe(200);
      const records = list.body.fetches as { id: string; uri: string; phase: string }[];
      expect(records.length).toBeGreaterThan(0);
      expect(records.map((r) => r.phase)).toEqual(expect.arrayContaining(['done', 'failed']));
      expect(records.every((r) => !r.uri.includes('secret'))).toBe(true);
      for (const r of records) expect(await rcall('GET', `/gateway/v1/fetches/${r.id}`)).toMatchObject({ status: 200, body: { id: r.id } });
    } finally {
      for (const jarId of fetched) await json('DELETE', `${remote.url}/jars/${jarId}`);
      await remote.close();
    }
  });

  it("the JobManager's own success bodies match the same schemas (the spec models Flink's contract)", async () => {
    const flink = flinkUrl();
    const up = await upload(`${flink}/v1/jars/upload`, 'WordCount.jar');
    const jarId = jarIdOf(up);
    try {
      assertMatchesSpec('POST', '/v1/jars/upload', up);
      for (const [method, path, body] of [
        ['GET', '/v1/jars', undefined],
        ['POST', `/v1/jars/${jarId}/plan`, {}],
        ['GET', `/v1/jars/${jarId}/plan`, undefined],
      ] as const) {
        assertMatchesSpec(method, path, await json(method, `${flink}${path}`, body));
      }
    } finally {
      const del = await json('DELETE', `${flink}/v1/jars/${jarId}`);
      assertMatchesSpec('DELETE', `/v1/jars/${jarId}`, del);
    }
  });
});
