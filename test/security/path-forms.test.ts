// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGateway, type TestGateway, writeTokensFile } from '../helpers/gateway';
import { startOrigin, type Origin } from '../helpers/origin';

/**
 * A class of hole (ADR 0009): no spelling of a path lowers the permission it needs.
 * Flink decodes a path twice (Netty once, ending at a raw '#'; its Router cuts at a decoded '?',
 * splits and decodes every segment again). Every spelling below is sent byte for byte over a raw
 * socket by a principal without the permission; none may reach the JobManager (a recording origin).
 */

const JOB = '0123456789abcdef0123456789abcdef';

/** Sends `method path` exactly as written (no client normalisation) and returns the status code. */
function rawRequest(port: number, method: string, path: string, token: string, body = ''): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let data = '';
    s.setEncoding('latin1');
    s.on('data', (d: string) => {
      data += d;
    });
    s.on('error', reject);
    s.on('close', () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (m) resolve(Number(m[1]));
      else reject(new Error(`no HTTP response for ${method} ${path}: ${JSON.stringify(data.slice(0, 200))}`));
    });
    s.write(
      `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      'latin1',
    );
  });
}

/** Spellings of one path: encoded letters and slashes, encoded '?'/'#' at several depths, raw '#', trailing and doubled slashes. */
function spellings(segments: string[]): string[] {
  const enc1 = (t: string) => t.replace(/[a-z-]/, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  const enc2 = (t: string) => enc1(t).replace('%', '%25');
  const plain = `/${segments.join('/')}`;
  const out = new Set<string>([
    plain,
    `/v1${plain}`,
    `${plain}/`,
    `//${segments.join('//')}//`,
    `/v1/${segments.join('%2F')}`,
    `/v1/${segments.join('%252F')}`,
    `/${segments.slice(0, -1).join('/')}/${enc1(segments.at(-1)!)}`,
    `/${segments.slice(0, -1).join('/')}/${enc2(segments.at(-1)!)}`,
    `/${segments.slice(0, -1).join('/')}/${enc2(enc2(segments.at(-1)!))}`,
    `/${enc1(segments[0]!)}/${segments.slice(1).join('/')}`,
    `/${enc2(segments[0]!)}/${segments.slice(1).join('/')}`,
    `${plain}?x=1`,
  ]);
  for (const tail of [
    '%3F',
    '%3f',
    '%253F',
    '%25253F',
    '%3Fx',
    '%23',
    '%2523',
    '#',
    '#frag',
    '%00',
    '%0A',
    '%FF',
    '%C0%AF',
    '%zz',
    '%',
    '%ED%A0%80',
  ]) {
    out.add(`${plain}${tail}`);
    out.add(`/v1${plain}${tail}`);
    out.add(`${plain}${tail}/`);
  }
  return [...out];
}

describe('no path spelling lowers the permission a request needs', () => {
  let jm: Origin;
  let gw: TestGateway;
  let dir: string;
  let port: number;
  const reached: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-path-forms-'));
    writeTokensFile(join(dir, 'tokens'), {
      viewer: 'tok-viewer',
      submitter: 'tok-submitter',
      admin: 'tok-admin',
      canceller: 'tok-canceller',
    });
    jm = await startOrigin((req, res) => {
      // The job watcher's own periodic read (every few seconds) is the gateway's, not a caller's request passed on.
      if (!(req.method === 'GET' && req.url === '/v1/jobs/overview')) reached.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    gw = await startGateway(jm.url, {
      'gateway.auth.tokens-file': join(dir, 'tokens'),
      'gateway.auth.permission.read': '*',
      'gateway.auth.permission.submit': 'token:submitter;token:admin',
      'gateway.auth.permission.cancel': 'token:admin;token:canceller',
    });
    port = Number(new URL(gw.url).port);
  });
  afterAll(async () => {
    await gw.close();
    await jm.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const cases: [string, string, string[], string][] = [
    ['a viewer', 'GET', ['jobs', JOB, 'yarn-cancel'], 'tok-viewer'],
    ['a viewer', 'GET', ['jobs', JOB, 'yarn-stop'], 'tok-viewer'],
    ['a submitter', 'GET', ['jobs', JOB, 'yarn-cancel'], 'tok-submitter'],
    ['a viewer', 'PATCH', ['jobs', JOB], 'tok-viewer'],
    ['a viewer', 'POST', ['jobs', JOB, 'stop'], 'tok-viewer'],
    ['a viewer', 'POST', ['jobs', JOB, 'savepoints'], 'tok-viewer'],
    ['a viewer', 'DELETE', ['cluster'], 'tok-viewer'],
    ['a viewer', 'POST', ['jobs'], 'tok-viewer'],
    ['a canceller', 'POST', ['jobs'], 'tok-canceller'],
    ['a canceller', 'POST', ['jars', 'x.jar', 'run'], 'tok-canceller'],
    ['a canceller', 'POST', ['jars', 'upload'], 'tok-canceller'],
    ['a viewer', 'POST', ['jars', 'x.jar', 'run'], 'tok-viewer'],
    ['a viewer', 'POST', ['jars', 'x.jar', 'plan'], 'tok-viewer'],
    ['a viewer', 'DELETE', ['jars', 'x.jar'], 'tok-viewer'],
    ['a viewer', 'POST', ['jars', 'upload'], 'tok-viewer'],
  ];

  let tried = 0;
  it.each(cases)('%s cannot %s /%s in any spelling', async (_who, method, segments, token) => {
    const before = reached.length;
    const statuses: Record<string, number> = {};
    for (const path of spellings(segments)) {
      statuses[path] = await rawRequest(port, method, path, token, method === 'POST' ? '{}' : '');
      tried++;
    }
    const passed = Object.entries(statuses).filter(([, s]) => s !== 400 && s !== 403 && s !== 404);
    expect({ passed, reachedJobManager: reached.slice(before) }).toEqual({ passed: [], reachedJobManager: [] });
  });

  it('tried enough spellings to mean something', () => expect(tried).toBeGreaterThan(500));

  it('controls: the permitted principal reaches the JobManager; a viewer reads', async () => {
    const before = reached.length;
    expect(await rawRequest(port, 'GET', `/jobs/${JOB}/yarn-cancel`, 'tok-admin')).toBe(200);
    expect(await rawRequest(port, 'GET', `/jobs/${JOB}/yarn%252Dcancel`, 'tok-admin')).toBe(200);
    expect(await rawRequest(port, 'GET', `/v1/jobs/${JOB}`, 'tok-viewer')).toBe(200);
    expect(reached.slice(before)).toEqual([`GET /jobs/${JOB}/yarn-cancel`, `GET /jobs/${JOB}/yarn%252Dcancel`, `GET /v1/jobs/${JOB}`]);
  });

  it("answers an ambiguous path with 400 GW_ROUTE_AMBIGUOUS in Flink's envelope", async () => {
    const r = await fetch(`${gw.url}/jobs/${JOB}/yarn-cancel%3F`, { headers: { authorization: 'Bearer tok-admin' } });
    expect(r.status).toBe(400);
    const body = (await r.json()) as { errors: string[] };
    expect(Object.keys(body)).toEqual(['errors']);
    expect(body.errors[0]).toMatch(/^GW_ROUTE_AMBIGUOUS: .*encoded '\?' or '#'/);
  });
});
