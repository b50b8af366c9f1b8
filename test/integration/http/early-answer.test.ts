import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { startFakeJobManager, type FakeJobManager } from '../../servers/fake-jobmanager';

const MiB = 1024 * 1024;

/**
 * Sends a POST with a `size`-byte body on a raw socket, `piece` bytes every `everyMs`, and reads
 * nothing until it has written everything (as a client that writes its request before it reads
 * the answer). `written`: bytes the socket took before it failed, if it did.
 */
function writeThenRead(
  port: number,
  path: string,
  size: number,
  piece: number,
  everyMs: number,
): Promise<{ answer: string; written: number; writeFailed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let written = 0;
    let writeFailed = false;
    let answer = '';
    socket.on('error', () => {
      writeFailed = true;
    });
    socket.on('close', () => resolve({ answer, written, writeFailed }));
    socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`);
    void (async () => {
      const chunk = Buffer.alloc(piece, 0x41);
      while (written < size && !socket.destroyed) {
        const n = Math.min(piece, size - written);
        if (!socket.write(chunk.subarray(0, n))) await new Promise((r) => socket.once('drain', r));
        written += n;
        if (everyMs > 0) await sleep(everyMs);
      }
      // Only now read the answer.
      socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    })();
  });
}

/**
 * A request answered before its body was read (here a refused path): the gateway reads and drops
 * the rest of the body, within bounds, before it ends the connection, so a client that is still
 * sending (Flink's RestClient submitting a job graph, a client that reads only after writing)
 * gets the answer rather than a reset.
 */
describe('an answer sent before the request body was read', () => {
  let jm: FakeJobManager;
  let gw: TestGateway;
  beforeAll(async () => {
    jm = await startFakeJobManager();
    gw = await startGateway(jm.url);
  });
  afterAll(async () => {
    await gw?.close();
    await jm?.stop();
  });

  it('reaches a client that goes on sending its body for seconds, and the connection then ends', async () => {
    const r = await writeThenRead(Number(new URL(gw.url).port), '/v1/jars/%zz/run', 2 * MiB, 64 * 1024, 60);
    expect(r.writeFailed).toBe(false);
    expect(r.written).toBe(2 * MiB);
    expect(r.answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(r.answer).toContain('GW_ROUTE_AMBIGUOUS');
  });

  it('is bounded: a body far larger than the drop limit is cut off', async () => {
    const r = await writeThenRead(Number(new URL(gw.url).port), '/v1/jars/%zz/run', 256 * MiB, 256 * 1024, 0);
    // 8 MiB are read and dropped; socket buffers on both sides add a few MiB.
    expect(r.written).toBeLessThan(64 * MiB);
  });
});
