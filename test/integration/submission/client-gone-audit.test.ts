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

  beforeAll(async () => {
    jm = await startOrigin((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.method === 'POST' && /\/run$/.test(req.url ?? '')) {
          const { jobId } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { jobId: string };
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
    await fetch(`${gw.url}/v1/jars/x.jar/run`, { method: 'POST', body: JSON.stringify({ jobId: gone }), signal: AbortSignal.timeout(200) }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1_200));
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
