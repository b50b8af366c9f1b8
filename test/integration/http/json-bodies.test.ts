import { Readable } from 'node:stream';
import { request } from 'undici';
import { JsonBudget } from '../../../src/http/json-body';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { writeThenRead } from '../../helpers/late-reader';
import { startOrigin, type Origin } from '../../helpers/origin';

/**
 * Run bodies are bounded in size (gateway.http.max-json-body, 4 MiB by
 * default: a declared larger one is refused before a byte is read) and in number held at once.
 */
describe('run and plan bodies are bounded', () => {
  let jm: Origin;
  let gw: TestGateway;
  let reached = 0;

  beforeAll(async () => {
    jm = await startOrigin((req, res) => {
      reached++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"jobid":"x"}');
    });
    gw = await startGateway(jm.url, { 'gateway.http.max-json-body': '1 mb' });
  });
  afterAll(async () => {
    await gw.close();
    await jm.close();
  });

  /** A body of `size` bytes made on demand (nothing is held in the test either). */
  const lazyBody = (size: number) => {
    let sent = 0;
    return new Readable({
      read() {
        if (sent >= size) return this.push(null);
        const n = Math.min(64 * 1024, size - sent);
        sent += n;
        this.push(Buffer.alloc(n, 0x20));
      },
    });
  };

  it('a declared 90 MB body is refused with 413 before it is read; chunked ones once past the limit', async () => {
    const declared = await request(`${gw.url}/v1/jars/x.jar/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(90 * 1024 ** 2) },
      body: lazyBody(90 * 1024 ** 2),
    }).catch((e: Error) => e);
    if (!(declared instanceof Error)) {
      expect(declared.statusCode).toBe(413);
      await declared.body.dump();
    }
    const chunked = await Promise.all(
      [1, 2].map(() =>
        request(`${gw.url}/v1/jars/x.jar/run`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: lazyBody(90 * 1024 ** 2),
        }).then(
          async (r) => {
            await r.body.dump();
            return r.statusCode;
          },
          () => 413, // the gateway closed the connection after answering
        ),
      ),
    );
    expect(chunked).toEqual([413, 413]);
    expect(reached).toBe(0);
  });

  it('a client that reads only after it has written 5 MiB (over the 1 MB limit) still reads the 413', async () => {
    // The body is not torn down at the limit: the answer is written first, and the rest of the body
    // is read and dropped until the client closes, so no reset throws the answer away.
    const head = await writeThenRead(
      Number(new URL(gw.url).port),
      'POST /v1/jars/x.jar/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json',
      '{"entryClass":"a.B","programArgs":"',
      5 * 1024 ** 2,
    );
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    expect(reached).toBe(0);
  });

  it('holds at most its budget of bodies at once; the next one gets 503 until one is released', () => {
    const budget = new JsonBudget(2);
    const a = budget.acquire();
    budget.acquire();
    expect(() => budget.acquire()).toThrow(expect.objectContaining({ code: 'GW_GATEWAY_BUSY', status: 503 }));
    a();
    a();
    expect(() => budget.acquire()).not.toThrow();
  });
});
