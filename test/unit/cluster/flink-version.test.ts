import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { atLeast, ClusterVersion, hasApplications } from '../../../src/cluster/flink-version';
import { JobManagerClient } from '../../../src/cluster/jobmanager-client';

describe('Flink version rules', () => {
  it.each([
    ['1.20.5', false],
    ['2.0.2', false],
    ['2.2.1', false],
    ['2.3.0', true],
    ['2.3-SNAPSHOT', true],
    ['2.10.0', true],
    ['3.0.0', true],
    ['garbage', false],
  ])('hasApplications(%s) = %s', (v, expected) => expect(hasApplications(v)).toBe(expected));

  it('compares major before minor', () => {
    expect(atLeast('1.99.0', 2, 0)).toBe(false);
    expect(atLeast('2.0.0', 1, 20)).toBe(true);
  });
});

describe('ClusterVersion against a real HTTP server answering GET /v1/config', () => {
  let server: Server;
  let calls = 0;
  let answer: { status: number; body: unknown } = { status: 503, body: { errors: ['leader election'] } };
  let client: JobManagerClient;
  beforeAll(async () => {
    server = createServer((req, res) => {
      calls++;
      res.writeHead(req.url === '/v1/config' ? answer.status : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    client = new JobManagerClient({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      requestTimeoutMs: 5000,
      runTimeoutMs: 5000,
    });
  });
  afterAll(async () => {
    await client.close();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('assumes nothing while the JobManager cannot say, then learns the version once and keeps it', async () => {
    const v = new ClusterVersion(client, pino({ level: 'silent' }));
    expect(await v.get()).toBeUndefined();
    answer = { status: 200, body: { 'flink-version': '2.3.0', 'flink-revision': 'x' } };
    const before = calls;
    expect(await Promise.all([v.get(), v.get()])).toEqual(['2.3.0', '2.3.0']);
    expect(calls - before).toBe(1); // concurrent callers share one request
    expect(await v.get()).toBe('2.3.0');
    expect(calls - before).toBe(1);
  });

  it('gateway.cluster.flink-version declares it without asking', async () => {
    const before = calls;
    expect(await new ClusterVersion(client, pino({ level: 'silent' }), '1.20.5').get()).toBe('1.20.5');
    expect(calls).toBe(before);
  });
});
