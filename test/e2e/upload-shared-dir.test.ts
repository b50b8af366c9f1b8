import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { filesUnder, json, newJobId, uploadBytes, uploadFile, waitForJobState, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import pino from 'pino';
import { JarHandoff } from '../../src/cluster/jar-handoff';
import { JobManagerClient } from '../../src/cluster/jobmanager-client';

const uploadDir = () => process.env.E2E_FLINK_UPLOAD_DIR ?? '';

/**
 * ADR 0019 on the real embedded Flink: a gateway sharing the JobManager's web.upload.dir links an
 * accepted upload into its jar directory instead of sending the bytes a second time. Flink lists,
 * plans, runs and deletes that jar as one it received itself, and the answer is the one Flink's
 * own upload gives (the same directory, a `<uuid>_<name>` id).
 */
describe('POST /jars/upload with the shared-dir hand-off, on the real Flink', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startGateway(flinkUrl(), { 'web.upload.dir': uploadDir(), 'gateway.artifacts.handoff': 'shared-dir' });
  });
  afterAll(async () => gw?.close());

  it("links WordCount into the jar directory; Flink lists, runs and deletes it; the answer has Flink's form", async () => {
    const direct = await uploadFile(flinkUrl(), WORDCOUNT_JAR, 'WordCount.jar');
    const up = await uploadFile(gw.url, WORDCOUNT_JAR, 'WordCount.jar');
    expect(up.status).toBe(200);
    expect(Object.keys(up.body)).toEqual(Object.keys(direct.body));
    expect(up.body.status).toBe(direct.body.status);
    expect(dirname(String(up.body.filename))).toBe(dirname(String(direct.body.filename)));
    const jarId = String(up.body.filename).split('/').pop()!;
    expect(jarId).toMatch(/^[0-9a-f-]{36}_WordCount\.jar$/);
    expect(readFileSync(String(up.body.filename)).equals(readFileSync(WORDCOUNT_JAR))).toBe(true);

    // Asked of Flink directly: the linked jar is one of its own.
    const listed = (await json('GET', `${flinkUrl()}/v1/jars`)).body.files as { id: string; name: string; entry: { name: string }[] }[];
    expect(listed.find((f) => f.id === jarId)).toMatchObject({
      name: 'WordCount.jar',
      entry: expect.arrayContaining([expect.objectContaining({ name: WORDCOUNT_CLASS })]),
    });

    const jobId = newJobId();
    expect(await json('POST', `${gw.url}/v1/jars/${jarId}/run`, { jobId, programArgsList: [] })).toMatchObject({
      status: 200,
      body: { jobid: jobId },
    });
    expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');

    expect(await json('DELETE', `${gw.url}/jars/${jarId}`)).toMatchObject({ status: 200, body: {} });
    expect(filesUnder(uploadDir()).filter((f) => f.endsWith(jarId))).toEqual([]);
    await json('DELETE', `${flinkUrl()}/v1/jars/${String(direct.body.filename).split('/').pop()}`);
  });

  it("links a run's transient jar under a name GET /jars does not list, which Flink still runs by id", async () => {
    const cluster = new JobManagerClient({ baseUrl: flinkUrl(), requestTimeoutMs: 30_000, runTimeoutMs: 120_000 });
    const handoff = new JarHandoff('shared-dir', cluster, uploadDir(), pino({ level: 'silent' }));
    try {
      const transient = await handoff.handOff(WORDCOUNT_JAR, 'WordCount.jar', 'test', true);
      const listed = (await json('GET', `${flinkUrl()}/v1/jars`)).body.files as { id: string }[];
      expect(listed.map((f) => f.id)).not.toContain(transient.jarId);
      const jobId = newJobId();
      expect(await json('POST', `${flinkUrl()}/v1/jars/${transient.jarId}/run`, { jobId, entryClass: WORDCOUNT_CLASS })).toMatchObject({
        status: 200,
        body: { jobid: jobId },
      });
      await transient.release();
      expect(filesUnder(uploadDir()).filter((f) => f.endsWith(transient.jarId))).toEqual([]);
      expect(await waitForJobState(flinkUrl(), jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
    } finally {
      await cluster.close();
    }
  });

  it("a refused upload leaves nothing in the JobManager's upload directory", async () => {
    const name = `random-${newJobId()}.jar`;
    const r = await uploadBytes(gw.url, [{ name, bytes: randomBytes(200_000) }]);
    expect(r.status).toBe(400);
    expect(String((r.body.errors as string[])[0])).toMatch(/^GW_UPLOAD_NOT_ZIP: /);
    expect(filesUnder(uploadDir()).filter((f) => f.includes(name))).toEqual([]);
  });
});
