import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { httpPlugin } from '../../../fs-plugins/http';
import { json, newJobId, uploadBytes } from '../../helpers/flink';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { buildJar } from '../../helpers/jars';
import { startFakeJobManager, type FakeJobManager } from '../../servers/fake-jobmanager';

const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
const CHUNKED = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
const LENGTH_100 = 'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n';

/**
 * What the hostile origin does after the response head: `body` is written in the same write as the
 * head (so that the client reads both at once), or in a second write after a pause (a later read);
 * then the connection is ended when `end` is set, and otherwise left open (a stall).
 */
interface Hostile {
  head: string;
  body: string;
  end: boolean;
}

/** One case for every state of the bulk client's parser in which the origin can go wrong. */
const CASES: [string, Hostile][] = [
  ['a malformed chunk-size line', { head: CHUNKED, body: 'zz\r\n', end: false }],
  ['a chunk size of 13 hex digits (overflow)', { head: CHUNKED, body: '1000000000000\r\n', end: false }],
  ['a negative chunk size', { head: CHUNKED, body: '-5\r\nhello\r\n0\r\n\r\n', end: false }],
  ['a chunk-size line ended by a bare LF', { head: CHUNKED, body: '5\nhello\r\n0\r\n\r\n', end: false }],
  ['a chunk-size line over 4 KiB', { head: CHUNKED, body: `5;${'x'.repeat(5000)}`, end: false }],
  ['chunk data longer than its size', { head: CHUNKED, body: '5\r\nhello, world\r\n0\r\n\r\n', end: false }],
  ['a chunk not followed by CRLF', { head: CHUNKED, body: '5\r\nhello\n0\r\n\r\n', end: false }],
  ['a trailer field ended by a bare LF', { head: CHUNKED, body: '5\r\nhello\r\n0\r\nX-T: 1\n\r\n', end: false }],
  [
    'trailer fields over 16 KiB',
    { head: CHUNKED, body: `5\r\nhello\r\n0\r\n${`X-T: ${'t'.repeat(1000)}\r\n`.repeat(20)}\r\n`, end: false },
  ],
  ['a malformed trailer field', { head: CHUNKED, body: '5\r\nhello\r\n0\r\nNoColon\r\n\r\n', end: false }],
  ['a Content-Length among the trailers', { head: CHUNKED, body: '5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n', end: false }],
  ['a malformed chunk extension', { head: CHUNKED, body: '5;a=b c\r\nhello\r\n0\r\n\r\n', end: false }],
  [
    'both framings in the head',
    { head: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n', body: '5\r\nhello\r\n0\r\n\r\n', end: false },
  ],
  ['a close inside a chunk-size line', { head: CHUNKED, body: '5\r\nhello\r\n1', end: true }],
  ['a close inside chunk data', { head: CHUNKED, body: '10\r\nhello', end: true }],
  ['a close before the chunk CRLF', { head: CHUNKED, body: '5\r\nhello', end: true }],
  ['a close inside the trailers', { head: CHUNKED, body: '5\r\nhello\r\n0\r\nX-T: 1\r\n', end: true }],
  ['a close inside a Content-Length body', { head: LENGTH_100, body: 'hello', end: true }],
  ['a stall inside a Content-Length body', { head: LENGTH_100, body: 'hello', end: false }],
  ['a stall inside a chunk', { head: CHUNKED, body: '10\r\nhello', end: false }],
];

/**
 * Hostile origins through a real gateway (fake JobManager, HTTP plugin on the bulk client): whatever
 * an origin sends after a well-formed response head — in the read that brought the head or in a
 * later one — a fetch by URI fails with 502 GW_FETCH_UNAVAILABLE in Flink's envelope, and nothing is
 * logged at error level (an unmapped error would be a 500 GW_INTERNAL_ERROR with its stack logged).
 */
describe('a hostile origin behind a fetch by URI (real gateway, raw node:net origin)', () => {
  let jm: FakeJobManager;
  let gw: TestGateway;
  let origin: Server;
  let originUrl: string;
  const sockets = new Set<Socket>();
  /** Path → what the origin answers a GET with; a HEAD gets the head alone. */
  const plans = new Map<string, { hostile: Hostile; split: boolean }>();
  let placeholder: string;

  beforeAll(async () => {
    origin = createServer((sock) => {
      sockets.add(sock);
      sock.on('close', () => sockets.delete(sock));
      sock.on('error', () => undefined);
      let pending = '';
      sock.on('data', (d: Buffer) => {
        pending += d.toString('latin1');
        for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
          const [method, path] = pending.slice(0, end).split(' ');
          pending = pending.slice(end + 4);
          void answer(sock, method!, path!).catch(() => undefined);
        }
      });
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const { port } = origin.address() as AddressInfo;
    originUrl = `http://127.0.0.1:${port}`;
    jm = await startFakeJobManager();
    gw = await startGateway(
      jm.url,
      {
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${port}`,
        'gateway.artifacts.fetch-retries': '0',
        'gateway.artifacts.http.read-timeout': '500 ms',
      },
      [httpPlugin],
    );
    const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    placeholder = String(up.body.filename).split('/').pop()!;
  });

  afterAll(async () => {
    await gw?.close();
    await jm?.stop();
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => (origin ? origin.close(() => resolve()) : resolve()));
  });

  async function answer(sock: Socket, method: string, path: string): Promise<void> {
    const plan = plans.get(path.split('?')[0]!);
    if (plan === undefined) return void sock.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
    const { hostile, split } = plan;
    if (method === 'HEAD') return void sock.write(hostile.head);
    sock.setNoDelay(true);
    if (split) {
      sock.write(hostile.head);
      await sleep(50);
      sock.write(hostile.body);
    } else {
      sock.write(hostile.head + hostile.body);
    }
    if (hostile.end) sock.end();
  }

  let n = 0;
  function serve(hostile: Hostile, split: boolean): string {
    const path = `/hostile-${n++}.jar`;
    plans.set(path, { hostile, split });
    return `${originUrl}${path}`;
  }

  function expectFetchError(r: { status: number; body: Record<string, unknown> }) {
    expect({ status: r.status, body: r.body }).toEqual({
      status: 502,
      body: { errors: [expect.stringMatching(/^GW_FETCH_UNAVAILABLE: /)] },
    });
  }

  /** Since log line `from`: nothing at error level, no stack. */
  function expectNothingAtErrorLevel(from: number) {
    const lines = gw.logs.slice(from);
    expect(lines.filter((l) => Number(l.level) >= 50)).toEqual([]);
    expect(lines.filter((l) => JSON.stringify(l).includes('"stack"'))).toEqual([]);
  }

  describe.each([
    ['in the read that brought the head', false],
    ['in a later read', true],
  ])('%s', (_when, split) => {
    it.each(CASES)('%s → POST /jars/fetch answers 502 GW_FETCH_UNAVAILABLE, nothing logged at error level', async (_name, hostile) => {
      const from = gw.logs.length;
      expectFetchError(await json('POST', `${gw.url}/jars/fetch`, { uri: serve(hostile, split) }));
      expectNothingAtErrorLevel(from);
    });
  });

  it('a run by URI (operator path) from an origin whose malformed chunk-size line comes with the head → 502 GW_FETCH_UNAVAILABLE, nothing runs', async () => {
    const runs = jm.runs.length;
    const from = gw.logs.length;
    const r = await json('POST', `${gw.url}/v1/jars/${placeholder}/run`, {
      jobId: newJobId(),
      flinkConfiguration: { 'user.artifacts.job-jar': serve(CASES[0]![1], false) },
    });
    expectFetchError(r);
    expect(jm.runs.length).toBe(runs);
    expectNothingAtErrorLevel(from);
  });
});
