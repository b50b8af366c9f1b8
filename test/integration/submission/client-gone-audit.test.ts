import { eventually } from '../../helpers/eventually';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { startOrigin, type Origin } from '../../helpers/origin';

/**
 * Fidelity item 8: the audit record says what the client got. A client that gives up while the
 * JobManager is still answering the run gets nothing, so the record says 499 — and the run, which
 * the JobManager accepted, is still recorded as accepted (a disconnect cancels no run).
 */
describe('the audit record of a run whose client gave up', () => {
  let jm: Origin;
  let gw: TestGateway;
  let answered = 0;
  /** Called when the JobManager stand-in receives a run (before it answers, 800 ms later). */
  let onRun: (jobId: string) => void = () => undefined;

  beforeAll(async () => {
    jm = await startOrigin((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method === 'POST' && /\/run$/.test(req.url ?? '')) {
          const { jobId } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { jobId: string };
          onRun(jobId);
          setTimeout(() => {
            answered++;
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jobid: jobId }));
          }, 800);
          return;
        }
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":["Not found"]}');
      });
    });
    gw = await startGateway(jm.url, {});
  });
  afterAll(async () => {
    await gw.close();
    await jm.close();
  });

  it('says 499 for the client that left, 200 for one that waited', async () => {
    const gone = '0123456789abcdef0123456789abcdef';
    // The client gives up once the JobManager has the run (not after a fixed time, which a busy
    // machine could spend before the run even reached it), and the test waits for the answer and
    // its audit record instead of a fixed second.
    const client = new AbortController();
    onRun = (jobId) => jobId === gone && client.abort();
    await fetch(`${gw.url}/v1/jars/x.jar/run`, { method: 'POST', body: JSON.stringify({ jobId: gone }), signal: client.signal }).catch(
      () => undefined,
    );
    await eventually(
      () => answered === 1 && gw.audit().some((a) => a.audit === 'submission' && a.jobId === gone),
      'the answer to the run its client left, and its audit record',
      60_000,
      20,
    );
    const waited = 'fedcba9876543210fedcba9876543210';
    const r = await fetch(`${gw.url}/v1/jars/x.jar/run`, { method: 'POST', body: JSON.stringify({ jobId: waited }) });
    expect(r.status).toBe(200);
    expect(answered).toBe(2);
    const runs = gw.audit().filter((a) => a.audit === 'submission' && a.route === 'run');
    expect(runs.map((a) => ({ jobId: a.jobId, outcome: a.outcome, status: a.status }))).toEqual([
      { jobId: gone, outcome: 'accepted', status: 499 },
      { jobId: waited, outcome: 'accepted', status: 200 },
    ]);
  });
});
