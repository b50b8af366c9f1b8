import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filePlugin } from '../../../fs-plugins/file';
import { startGateway } from '../../helpers/gateway';
import { buildJar } from '../../helpers/jars';
import { startOrigin } from '../../helpers/origin';
import { json, uploadBytes } from '../../helpers/flink';
import { startFakeJobManager } from '../../servers/fake-jobmanager';

/**
 * What the JobManager receives for a run by URI (a node:http origin records it): the fetched jar's
 * id instead of the placeholder, and a configuration that carries provenance instead of the URI.
 * The transient jar is deleted after the run.
 */
describe('the run forwarded for a jar URI', () => {
  it('names the fetched jar, drops user.artifacts.job-jar, adds gateway.artifact.*, deletes the transient jar', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-fwd-'));
    const jar = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n' });
    writeFileSync(join(dir, 'app.jar'), jar);
    const seen: { method: string; url: string; body: string }[] = [];
    const jm = await startOrigin((req, res) => {
      let body = '';
      req.setEncoding('latin1').on('data', (d: string) => (body += d));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, body });
        res.writeHead(200, { 'content-type': 'application/json' });
        if (req.url === '/v1/jars/upload') res.end(JSON.stringify({ filename: '/jm/flink-web-upload/1111_app.jar', status: 'success' }));
        else if (req.url?.endsWith('/run')) res.end(JSON.stringify({ jobid: (JSON.parse(body) as { jobId: string }).jobId }));
        else res.end('{}');
      });
    });
    const gw = await startGateway(
      jm.url,
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.handoff': 'upload',
        'gateway.artifacts.allowed-schemes': 'file',
        'gateway.artifacts.local-file.enabled': 'true',
        'gateway.artifacts.local-file.allowed-dirs': dir,
      },
      [filePlugin],
    );
    try {
      const uri = `file://${join(dir, 'app.jar')}`;
      const r = await fetch(`${gw.url}/v1/jars/0000_placeholder.jar/run`, {
        method: 'POST',
        body: JSON.stringify({
          jobId: 'b'.repeat(32),
          flinkConfiguration: {
            'user.artifacts.job-jar': uri,
            'gateway.artifacts.job-jar.sha256': createHash('sha256').update(jar).digest('hex'),
            'x.y': 'z',
          },
        }),
      });
      expect(r.status).toBe(200);
      const run = seen.find((s) => s.url.endsWith('/run'))!;
      expect(run.url).toBe('/v1/jars/1111_app.jar/run');
      const cfg = (JSON.parse(run.body) as { flinkConfiguration: Record<string, string> }).flinkConfiguration;
      expect(cfg).toEqual({
        'x.y': 'z',
        'gateway.artifact.uri': uri,
        'gateway.artifact.sha256': createHash('sha256').update(jar).digest('hex'),
      });
      expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
        'POST /v1/jars/upload',
        'POST /v1/jars/1111_app.jar/run',
        'DELETE /v1/jars/1111_app.jar',
      ]);
    } finally {
      await gw.close();
      await jm.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('ignores user.artifacts.artifact-list without a job-jar URI (Flink does in session mode): a warning and an audit verdict, not a 400', async () => {
    // The operator merges the cluster's configuration into every run: one such key in a
    // FlinkDeployment would otherwise fail every session job of that cluster.
    const jm = await startFakeJobManager();
    const gw = await startGateway(jm.url, {});
    try {
      const up = await uploadBytes(gw.url, [
        {
          name: 'app.jar',
          bytes: buildJar({
            'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n',
            'a/B.class': Buffer.from('cafebabe', 'hex'),
          }),
        },
      ]);
      const jarId = String(up.body.filename).split('/').pop()!;
      const jobId = 'c'.repeat(32);
      const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
        jobId,
        flinkConfiguration: { 'user.artifacts.artifact-list': 'https://repo.example/udf.jar;https://repo.example/fmt.jar', 'x.y': 'z' },
      });
      expect(r).toMatchObject({ status: 200, body: { jobid: jobId } });
      expect(jm.runs.find((x) => x.jobId === jobId)?.flinkConfiguration).toEqual({ 'x.y': 'z' });
      const audit = gw.audit().find((a) => a.audit === 'submission' && a.jobId === jobId)!;
      expect((audit.verdicts as Record<string, string>).artifacts).toMatch(
        /^ignored: user\.artifacts\.artifact-list without user\.artifacts\.job-jar/,
      );
      expect(
        gw.logs.some(
          (l) => l.level === 40 && String(l.msg).startsWith('user.artifacts.artifact-list is set without user.artifacts.job-jar'),
        ),
      ).toBe(true);
    } finally {
      await gw.close();
      await jm.stop();
    }
  });
});
