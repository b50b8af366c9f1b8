import { PassThrough, Readable, Writable } from 'node:stream';
import { relayBody } from '../../../src/http/pass-through';

/** A client side that keeps what it is written and needs `drain` after every `limit` bytes. */
function client(limit = 16): Writable & { got: Buffer[] } {
  const got: Buffer[] = [];
  return Object.assign(
    new Writable({
      highWaterMark: limit,
      write(chunk: Buffer, _enc, done) {
        got.push(chunk);
        setImmediate(done);
      },
    }),
    { got },
  );
}

/**
 * The pass-through's relay of an answer body (src/http/pass-through.ts), on plain streams: the
 * windows that an HTTP test cannot open on purpose (a client already gone before the relay starts,
 * a body already destroyed) and the ordinary path with backpressure.
 */
describe('relayBody', () => {
  it('relays every chunk in order, pausing the body while the client has no room, and ends the client', async () => {
    const res = client();
    const chunks = Array.from({ length: 20 }, (_, i) => Buffer.alloc(10, i));
    const body = Readable.from(chunks, { objectMode: false });
    await relayBody(body, res);
    expect(res.writableFinished || res.writableEnded).toBe(true);
    expect(Buffer.concat(res.got).equals(Buffer.concat(chunks))).toBe(true);
  });

  it('a client gone before the relay starts: the body is destroyed (ending the upstream exchange) and the relay settles', async () => {
    const res = client();
    res.destroy();
    await new Promise((r) => setImmediate(r));
    const body = new PassThrough();
    await relayBody(body, res);
    expect(body.destroyed).toBe(true);
  });

  it('a body destroyed before the relay starts rejects with its error', async () => {
    const body = new PassThrough();
    body.on('error', () => undefined);
    body.destroy(new Error('upstream reset'));
    await expect(relayBody(body, client())).rejects.toThrow('upstream reset');
    const closed = new PassThrough();
    closed.destroy();
    await expect(relayBody(closed, client())).rejects.toThrow('the answer was closed before it was read');
  });

  it('a client that goes away mid-answer destroys the body; a body that fails mid-answer rejects', async () => {
    const res = client();
    const body = new PassThrough();
    const relayed = relayBody(body, res);
    body.write(Buffer.alloc(8));
    res.destroy();
    await relayed;
    expect(body.destroyed).toBe(true);

    const failing = new PassThrough();
    const second = relayBody(failing, client());
    failing.destroy(new Error('broken off'));
    await expect(second).rejects.toThrow('broken off');
  });
});
