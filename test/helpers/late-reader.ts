import { connect } from 'node:net';

/**
 * A client that reads only after it has written: sends a chunked request (`head` without the blank
 * line ending it, then `prefix`, then `fillerBytes` of filler) without reading, and only then reads
 * the answer until the connection closes. A gateway that closes while such a client is still sending
 * resets the connection, and the answer is lost; a lingering close keeps it. Resolves with the
 * answer's status line and headers ('' when none arrived).
 */
export function writeThenRead(port: number, head: string, prefix: string, fillerBytes: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.pause();
    let response = '';
    socket.on('data', (d: Buffer) => {
      response += d.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(response.split('\r\n\r\n')[0] ?? ''));
    const frame = (b: Buffer) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n')]);
    socket.write(`${head}\r\nTransfer-Encoding: chunked\r\n\r\n`);
    socket.write(frame(Buffer.from(prefix)));
    const filler = frame(Buffer.alloc(256 * 1024, 0x20));
    for (let written = 0; written < fillerBytes; written += 256 * 1024) socket.write(filler);
    // Writes complete in order: this one's callback runs once everything was handed over (or failed).
    socket.write('', () => socket.resume());
  });
}
