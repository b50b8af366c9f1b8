import { request } from 'undici';
import { startGateway } from '../../helpers/gateway';
import { startOrigin } from '../../helpers/origin';

/**
 * The operator's contract on a JobManager that answers slowly (a node:http origin standing in for
 * it, so the timing can be controlled): a client that gives up does not cancel the run, and a retry
 * with the same jobId gets the first result without a second submission.
 */
describe('run single-flight and client disconnects', () => {
  it('keeps a run going after the client disconnects; the retry returns its result', async () => {
    const runs: string[] = [];
    const origin = await startOrigin((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (d: string) => (body += d));
      req.on('end', () => {
        // The gateway answers a retry from memory only while the JobManager still knows the job.
        const status = /^\/v1\/jobs\/([0-9a-f]{32})$/.exec(req.url!);
        if (req.method === 'GET' && status) {
          const known = runs.some((r) => (JSON.parse(r) as { jobId: string }).jobId === status[1]);
          res.writeHead(known ? 200 : 404, { 'content-type': 'application/json' });
          res.end(JSON.stringify(known ? { status: 'RUNNING' } : { errors: ['Job not found'] }));
          return;
        }
        if (req.method === 'POST' && /\/v1\/jars\/[^/]+\/run$/.test(req.url!)) {
          runs.push(body);
          const { jobId } = JSON.parse(body) as { jobId: string };
          setTimeout(() => {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ jobid: jobId }));
          }, 600);
          return;
        }
        res.writeHead(404).end();
      });
    });
    const gw = await startGateway(origin.url);
    try {
      const jobId = 'a'.repeat(32);
      const ac = new AbortController();
      const first = request(`${gw.url}/v1/jars/x_app.jar/run`, { method: 'POST', body: JSON.stringify({ jobId }), signal: ac.signal });
      setTimeout(() => ac.abort(), 150);
      // The client's own abort, not a failure of the gateway.
      await expect(first).rejects.toMatchObject({ name: 'AbortError' });
      // The retry arrives while the first run is still in flight, then once more after it finished.
      const retry = await request(`${gw.url}/v1/jars/x_app.jar/run`, { method: 'POST', body: JSON.stringify({ jobId }) });
      expect(retry.statusCode).toBe(200);
      expect(await retry.body.json()).toEqual({ jobid: jobId });
      const later = await request(`${gw.url}/v1/jars/x_app.jar/run`, {
        method: 'POST',
        body: JSON.stringify({ jobId: jobId.toUpperCase() }),
      });
      expect(await later.body.json()).toEqual({ jobid: jobId });
      expect(runs).toHaveLength(1);
    } finally {
      await gw.close();
      await origin.close();
    }
  });

  it('always hands the JobManager a jobId', async () => {
    const seen: { jobId?: string }[] = [];
    const origin = await startOrigin((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (d: string) => (body += d));
      req.on('end', () => {
        const parsed = JSON.parse(body) as { jobId?: string };
        seen.push(parsed);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jobid: parsed.jobId }));
      });
    });
    const gw = await startGateway(origin.url);
    try {
      const r = await request(`${gw.url}/jars/x_app.jar/run`, { method: 'POST' });
      const body = (await r.body.json()) as { jobid: string };
      expect(body.jobid).toMatch(/^[0-9a-f]{32}$/);
      expect(seen[0]?.jobId).toBe(body.jobid);
    } finally {
      await gw.close();
      await origin.close();
    }
  });
});
