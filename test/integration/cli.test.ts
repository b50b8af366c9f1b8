import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { startOrigin } from '../helpers/origin';
import { Agent, request } from 'undici';
import { startGatewayProcess } from '../helpers/gateway-process';
import { runProcess } from '../helpers/run-process';

// Runs the built CLI (npm test builds dist/ first), as a user would.
const root = projectRoot(__dirname);
const bin = join(root, 'bin', 'flink-jar-gateway.js');

describe('the command line', () => {
  it('refuses a Node older than 24 with one line', async () => {
    const systemNode = '/usr/bin/node';
    const major = existsSync(systemNode) ? Number(execFileSync(systemNode, ['-p', 'process.versions.node.split(".")[0]']).toString().trim()) : 99;
    if (major >= 24) {
      // Nothing older to try here; the check itself is a plain comparison in bin/.
      expect(major).toBeGreaterThanOrEqual(24);
      return;
    }
    const r = await runProcess(systemNode, [bin, '--help'], { timeoutMs: 20_000 });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/needs Node\.js 24 or newer, but this is v\d+/);
  });

  it('prints the options from the registry with --help', async () => {
    const r = await runProcess(process.execPath, [bin, '--help'], { timeoutMs: 20_000 });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('gateway.cluster.rest-url');
    expect(r.stdout).toContain('rest.port');
  });

  it('reports every configuration problem at once and exits 2', async () => {
    const r = await runProcess(process.execPath, [bin, '-Drest.port=high', '-Dgateway.upload.max-size=lots'], { timeoutMs: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('2 problems');
    expect(r.stderr).toContain('rest.port');
    expect(r.stderr).toContain('gateway.upload.max-size');
  });

  it('says in one line what to do when Java is missing', async () => {
    const r = await runProcess(process.execPath, [bin, '-Dgateway.embedded.java=/nonexistent/java', '-Drest.port=0'], { timeoutMs: 20_000 });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/needs Java 17\+.*gateway\.cluster\.rest-url/);
  });

  it('fronts an existing JobManager, warns about secrets on the command line without printing them, and drains on SIGTERM', async () => {
    const origin = await startOrigin((_req, res) => res.end('{}'));
    const gw = await startGatewayProcess([`-Dgateway.cluster.rest-url=${origin.url}`, '-Drest.port=0', '-Ds3.access-key=AKIDCLI', '-Ds3.secret-key=cli-secret-987']);
    try {
      expect((await fetch(`${gw.url}/gateway/v1/health`)).status).toBe(200);
      expect(await gw.stop()).toBe(0);
      expect(gw.output()).toContain('a sensitive option was given with -D');
      expect(gw.output()).not.toContain('cli-secret-987');
    } finally {
      gw.kill();
      await origin.close();
    }
  });
});

describe('graceful drain on SIGTERM', () => {
  it('finishes the request in flight, closes keep-alive connections at once, and exits promptly', async () => {
    // (Without the drain sweep, the kept-alive connection would hold the process for its 65 s idle timeout.)
    const origin = await startOrigin((req, res) => {
      const delay = req.url?.includes('slow') ? 1500 : 0;
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'), delay);
    });
    const gw = await startGatewayProcess([`-Dgateway.cluster.rest-url=${origin.url}`, '-Drest.port=0']);
    const agent = new Agent({ keepAliveTimeout: 60_000 });
    try {
      const url = gw.url;
      // A kept-alive connection, then a slow request in flight when SIGTERM arrives.
      await (await request(`${url}/v1/overview`, { dispatcher: agent })).body.dump();
      const slow = request(`${url}/v1/slow`, { dispatcher: agent });
      await new Promise((r) => setTimeout(r, 300));
      const started = Date.now();
      const exit = gw.stop();
      const res = await slow;
      expect(res.statusCode).toBe(200);
      await res.body.dump();
      expect(await exit).toBe(0);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      gw.kill();
      await agent.close();
      await origin.close();
    }
  });
});

describe('plugin settings are validated at start', () => {
  it('a half S3 key pair stops start-up with a message naming the missing key', async () => {
    const r = await runProcess(process.execPath, [bin, '-Dgateway.cluster.rest-url=http://127.0.0.1:9', '-Drest.port=0', '-Ds3.access-key=AKIDONLY'], { timeoutMs: 20_000 });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('s3.secret-key');
  });
});
