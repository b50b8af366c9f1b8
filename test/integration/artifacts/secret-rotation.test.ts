import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { s3Plugin } from '../../../fs-plugins/s3';
import { buildJar } from '../../helpers/jars';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { startOrigin, type Origin } from '../../helpers/origin';
import { putObject, startS3Server, type S3Server } from '../../servers/s3-server';

/**
 * Credentials come from files (a mounted Kubernetes Secret) and are re-read when they change: a
 * rotated S3 secret is used by the next fetch without a restart. Real SigV4-checking S3 server; a
 * node:http origin stands in for the JobManager (the hand-off upload is accepted and discarded).
 */
describe('credentials from gateway.secrets.dir', () => {
  let s3: S3Server;
  let jm: Origin;
  let gw: TestGateway;
  let dir: string;
  const secret = `rotated-${randomBytes(6).toString('hex')}`;

  beforeAll(async () => {
    s3 = await startS3Server({ keys: { AKIDROT: secret }, buckets: ['jars'] });
    await putObject(
      s3.url,
      { accessKeyId: 'AKIDROT', secretAccessKey: secret },
      'jars',
      'app.jar',
      buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' }),
    );
    jm = await startOrigin((req, res) => {
      req.resume();
      req.on('end', () =>
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ filename: '/x/flink-web-upload/abc_app.jar', status: 'success' })),
      );
    });
    dir = mkdtempSync(join(tmpdir(), 'gw-secrets-'));
    writeFileSync(join(dir, 's3.access-key'), 'AKIDROT\n');
    writeFileSync(join(dir, 's3.secret-key'), 'the-old-secret\n');
    gw = await startGateway(
      jm.url,
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 's3',
        'gateway.artifacts.handoff': 'upload',
        'gateway.secrets.dir': dir,
        'gateway.secrets.poll-interval': '100 ms',
        's3.endpoint': s3.url,
        's3.path.style.access': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${s3.port}`,
      },
      [s3Plugin],
    );
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await jm?.close();
    await s3?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const fetchJar = () => fetch(`${gw.url}/jars/fetch`, { method: 'POST', body: JSON.stringify({ uri: 's3://jars/app.jar' }) });

  it('uses the rotated secret on the next fetch, and never logs either', async () => {
    const before = await fetchJar();
    expect(before.status).toBe(400);
    expect(((await before.json()) as { errors: string[] }).errors[0]).toMatch(/^GW_FETCH_DENIED: /);

    writeFileSync(join(dir, 's3.secret-key'), `${secret}\n`);
    let after: Response | undefined;
    for (let i = 0; i < 50; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await fetchJar();
      if (after.status === 200) break;
    }
    expect(after?.status).toBe(200);
    const logs = JSON.stringify(gw.logs);
    expect(logs).toContain('secret files changed');
    expect(logs).not.toContain(secret);
    expect(logs).not.toContain('the-old-secret');
  });
});
