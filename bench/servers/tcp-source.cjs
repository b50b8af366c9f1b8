'use strict';
// The socket-to-file ceiling's sender: a raw TCP server in its own process that writes <bytes>
// bytes (a repeated 1 MiB random block, with back-pressure) to each connection, then closes it.
// No HTTP, no disk read: what is left is loopback TCP plus the receiver's own cost.
// Usage: node tcp-source.cjs <bytes> ; prints "TCP_SOURCE_READY <port>".
const net = require('node:net');
const { randomBytes } = require('node:crypto');

const total = Number(process.argv[2]);
const block = randomBytes(1024 * 1024);
const server = net.createServer((sock) => {
  let left = total;
  sock.on('error', () => undefined);
  const pump = () => {
    while (left > 0) {
      const n = Math.min(left, block.length);
      left -= n;
      if (!sock.write(n === block.length ? block : block.subarray(0, n))) return void sock.once('drain', pump);
    }
    sock.end();
  };
  pump();
});
server.listen(0, '127.0.0.1', () => console.log(`TCP_SOURCE_READY ${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
