'use strict';
// A simulated wide-area link for the benchmarks, in its own process: a TCP proxy on 127.0.0.1 that
// forwards every connection to one upstream (host:port) and
//  - caps throughput PER CONNECTION (a token bucket on each direction; object stores and CDNs cap a
//    single stream, and their own CLIs read large objects with many ranged requests at once),
//  - adds latency: each chunk is delivered half the RTT after it arrived, in both directions (so a
//    request/response round trip costs one RTT on top of the loopback one; the TCP handshake
//    through the proxy is not delayed, a simplification).
// It is a simulation, not a network: no loss, no congestion control of its own; backpressure
// (pause/resume) keeps its memory bounded to about one bucket's worth per connection. It reads
// in large chunks and batches its timers so that on 2 cores it is not the limit itself; its own CPU
// is reported by the bench from /proc/<pid>/stat.
// Usage: node throttle-proxy.cjs <upstream host:port> <bytes per second per connection> <rtt ms>
// prints "THROTTLE_PROXY_READY <port>".
const net = require('node:net');

const [upstreamArg, rateArg, rttArg] = process.argv.slice(2);
const [upHost, upPort] = upstreamArg.split(':');
const rate = Number(rateArg); // bytes per second, each direction of each connection
const oneWay = Number(rttArg) / 2;
/** Most bytes queued in one direction before the reading side is paused. */
const MAX_QUEUED = Math.max(256 * 1024, Math.ceil(rate * 0.05));

/** One direction of one connection: bytes are released at `rate`, each no earlier than arrival + oneWay. */
function shape(from, to) {
  const queue = []; // [releaseAt, chunk]
  let queued = 0;
  let nextFree = 0; // when the link is free to send the next byte (ms, performance.now())
  let timer;
  let ended = false;
  const pump = () => {
    timer = undefined;
    const now = performance.now();
    while (queue.length > 0 && queue[0][0] <= now) {
      const [, chunk] = queue.shift();
      queued -= chunk.length;
      to.write(chunk);
    }
    if (queued < MAX_QUEUED && from.isPaused()) from.resume();
    if (queue.length > 0) timer = setTimeout(pump, Math.max(1, queue[0][0] - now));
    else if (ended) {
      to.end();
      // Both directions done: nothing more can pass; free the sockets.
      if (to.readableEnded || to.destroyed) {
        from.destroy();
        to.destroy();
      }
    }
  };
  from.on('data', (chunk) => {
    const now = performance.now();
    // Serialisation at `rate` starts when the link is free; delivery is one way's latency later.
    const start = Math.max(now, nextFree);
    nextFree = start + (chunk.length / rate) * 1000;
    queue.push([nextFree + oneWay, chunk]);
    queued += chunk.length;
    if (queued >= MAX_QUEUED) from.pause();
    if (timer === undefined) timer = setTimeout(pump, Math.max(1, queue[0][0] - now));
  });
  from.on('end', () => {
    ended = true;
    if (timer === undefined) pump();
  });
}

const sockets = new Set();
// Half-open on both sides: an end (FIN) is passed on only after the data queued before it, so a
// server that answers and closes still delivers its answer; an error resets both sides at once.
const server = net.createServer({ highWaterMark: 1024 * 1024, allowHalfOpen: true }, (client) => {
  const upstream = net.connect({ host: upHost, port: Number(upPort), highWaterMark: 1024 * 1024, allowHalfOpen: true });
  sockets.add(client).add(upstream);
  const reset = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', reset).on('close', () => sockets.delete(client));
  upstream.on('error', reset).on('close', () => sockets.delete(upstream));
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  shape(client, upstream);
  shape(upstream, client);
});
server.listen(0, '127.0.0.1', () => console.log(`THROTTLE_PROXY_READY ${server.address().port}`));
process.on('SIGTERM', () => {
  for (const s of sockets) s.destroy();
  server.close(() => process.exit(0));
});
