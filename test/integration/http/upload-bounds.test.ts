import { connect } from 'node:net';
import { json, uploadBytes } from '../../helpers/flink';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { writeThenRead } from '../../helpers/late-reader';
import { buildJar } from '../../helpers/jars';
import { startFakeJobManager, type FakeJobManager } from '../../servers/fake-jobmanager';

const MiB = 1024 * 1024;
const JAR = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': 'x' });

/**
 * Writes a chunked multipart upload of `total` file bytes on a raw socket (no Content-Length, so
 * the gateway cannot refuse it up front) and reports how many bytes the socket accepted before the
 * gateway answered and closed it, and the answer's status line and headers.
 */
/** `stopOnAnswer`: stop sending once an answer arrives, as curl and Node's client do; otherwise send on regardless. */
function chunkedUpload(port: number, total: number, stopOnAnswer = false): Promise<{ written: number; head: string; closed: boolean }> {
  return new Promise((resolve) => {
    const boundary = 'gw-test-boundary';
    const socket = connect(port, '127.0.0.1');
    let written = 0;
    let response = '';
    let closed = false;
    let stopped = false;
    const chunk = Buffer.alloc(256 * 1024, 0x41);
    const frame = (b: Buffer | string) => {
      const buf = Buffer.isBuffer(b) ? b : Buffer.from(b);
      return Buffer.concat([Buffer.from(`${buf.length.toString(16)}\r\n`), buf, Buffer.from('\r\n')]);
    };
    socket.on('data', (d) => {
      response += d.toString('latin1');
      if (stopOnAnswer) stopped = true;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      stopped = true;
      resolve({ written, head: response.split('\r\n\r\n')[0] ?? '', closed });
    });
    socket.write(
      'POST /jars/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n' +
        `Content-Type: multipart/form-data; boundary=${boundary}\r\n\r\n`,
    );
    socket.write(
      frame(
        `--${boundary}\r\nContent-Disposition: form-data; name="jarfile"; filename="big.jar"\r\nContent-Type: application/java-archive\r\n\r\n`,
      ),
    );
    const pump = () => {
      while (!stopped && written < total) {
        written += chunk.length;
        if (!socket.write(frame(chunk))) return void socket.once('drain', pump);
      }
      if (!stopped) socket.end(frame(`\r\n--${boundary}--\r\n`) + '0\r\n\r\n');
    };
    pump();
  });
}

/**
 * The bounds of POST /jars/upload on real sockets (multer parses; the gateway's storage engine
 * streams): an oversized body is answered 413 and the connection closed after a bounded read — the
 * gateway never reads the rest — and nothing is kept on the (fake) JobManager.
 */
describe('upload bounds on a real socket (fake JobManager)', () => {
  let jm: FakeJobManager;
  let gw: TestGateway;

  beforeAll(async () => {
    jm = await startFakeJobManager();
    gw = await startGateway(jm.url, { 'gateway.upload.max-size': `${JAR.length}` });
  });

  afterAll(async () => {
    await gw?.close();
    await jm?.stop();
  });

  it('a chunked body far over gateway.upload.max-size → 413 with connection: close for a client that reads the answer, nothing kept', async () => {
    const before = jm.jars.size;
    const r = await chunkedUpload(Number(new URL(gw.url).port), 512 * MiB, true);
    expect(r.head).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.head.toLowerCase()).toContain('connection: close');
    expect(r.closed).toBe(true);
    expect(jm.jars.size).toBe(before);
  });

  it('a client that reads only after it has written (12 MiB, past the 8 MiB the gateway reads before answering) still reads the 413', async () => {
    // The gateway answers after its bounded read and ends the connection, but keeps reading and
    // dropping what the client still sends until the client closes (a lingering close): a close with
    // unread bytes would be a reset, which throws away the answer the client has not read yet.
    const before = jm.jars.size;
    const boundary = 'gw-test-boundary';
    const head = await writeThenRead(
      Number(new URL(gw.url).port),
      `POST /jars/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=${boundary}`,
      `--${boundary}\r\nContent-Disposition: form-data; name="jarfile"; filename="big.jar"\r\n\r\n`,
      12 * MiB,
    );
    expect(head).toMatch(/^HTTP\/1\.1 413 /);
    expect(head.toLowerCase()).toContain('connection: close');
    expect(jm.jars.size).toBe(before);
  });

  it('a client that sends on regardless: the connection is closed after a bounded read, nothing kept', async () => {
    // Its 413 may be lost to the TCP reset the close causes while the client still sends (a
    // loaded machine seldom reads it in time); what is bounded is how much the gateway reads.
    const before = jm.jars.size;
    const r = await chunkedUpload(Number(new URL(gw.url).port), 512 * MiB);
    expect(r.head === '' || /^HTTP\/1\.1 413 /.test(r.head)).toBe(true);
    expect(r.closed).toBe(true);
    // The gateway reads at most 8 MiB after the refusal; socket buffers on both sides add a few MiB.
    // Draining the whole body would have taken all 512.
    expect(r.written).toBeLessThan(64 * MiB);
    expect(jm.jars.size).toBe(before);
    expect((await json('GET', `${gw.url}/gateway/v1/health`)).status).toBe(200);
  });

  it('a jar of exactly gateway.upload.max-size is accepted; one byte more is 413', async () => {
    const ok = await uploadBytes(gw.url, [{ name: 'exact.jar', bytes: JAR }]);
    expect(ok.status).toBe(200);
    const over = Buffer.concat([JAR, Buffer.from([0])]);
    const before = jm.jars.size;
    const r = await uploadBytes(gw.url, [{ name: 'over.jar', bytes: over }]);
    expect(r.status).toBe(413);
    expect(String((r.body.errors as string[])[0])).toMatch(/^GW_UPLOAD_TOO_LARGE: /);
    expect(jm.jars.size).toBe(before);
  });
});
