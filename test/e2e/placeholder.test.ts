import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { httpPlugin } from '../../fs-plugins/http';
import { errorCode, json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { operatorPlaceholderJar } from '../helpers/operator-placeholder';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';

/**
 * Fidelity item 6 on the real embedded Flink: with user.artifacts.job-jar, the gateway replaces the
 * jar in the path only when it is a placeholder without classes — the operator's empty.jar, built
 * here exactly as the operator builds it. A path jar with classes plus a URI is a 400 naming the
 * conflict, and nothing runs.
 */
const WORDCOUNT = readFileSync(WORDCOUNT_JAR);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('placeholder awareness', () => {
  let o: HttpOrigin;
  let gw: TestGateway;
  const jars: string[] = [];

  beforeAll(async () => {
    o = await startHttpOrigin({ files: { '/wordcount.jar': WORDCOUNT } });
    gw = await startGateway(
      flinkUrl(),
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${o.port}`,
      },
      [httpPlugin],
    );
  }, 60_000);
  afterAll(async () => {
    for (const id of jars) await json('DELETE', `${gw.url}/v1/jars/${id}`).catch(() => undefined);
    await gw?.close();
    await o?.stop();
  });

  const upload = async (name: string, bytes: Buffer) => {
    const r = await uploadBytes(gw.url, [{ name, bytes, field: 'file_0' }], { request: '{}' });
    expect(r.status).toBe(200);
    const id = String(r.body.filename).split('/').pop()!;
    jars.push(id);
    return id;
  };

  it("runs the URI in place of the operator's empty.jar", async () => {
    const placeholder = await upload('empty.jar', await operatorPlaceholderJar());
    const jobId = newJobId();
    const r = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      jobId,
      flinkConfiguration: { 'user.artifacts.job-jar': `${o.url}/wordcount.jar` },
    });
    expect(r).toMatchObject({ status: 200, body: { jobid: jobId } });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect(gw.audit().find((a) => a.audit === 'submission' && a.jobId === jobId)).toMatchObject({ source: 'uri', sha256: sha(WORDCOUNT) });
  }, 120_000);

  it('refuses a URI run whose path jar holds classes (400 GW_JAR_URI_CONFLICT), and nothing runs', async () => {
    const real = await upload('WordCount.jar', WORDCOUNT);
    const before = o.requests.length;
    const jobId = newJobId();
    const r = await json('POST', `${gw.url}/v1/jars/${real}/run`, {
      jobId,
      flinkConfiguration: { 'user.artifacts.job-jar': `${o.url}/wordcount.jar?sig=secret` },
    });
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 400, code: 'GW_JAR_URI_CONFLICT' });
    expect(String((r.body.errors as string[])[0])).not.toContain('secret');
    expect((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).status).toBe(404);
    expect(o.requests.length).toBe(before); // refused before anything was fetched
  });
});
