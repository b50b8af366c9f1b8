// A plain HTTP origin in its own process serving one file from disk (streamed, with content-length
// and ETag), so that a test measuring the gateway's memory does not also measure the origin.
// Usage: node file-origin.cjs <file> ; prints "FILE_ORIGIN_READY http://127.0.0.1:<port>".
const http = require('node:http');
const fs = require('node:fs');
const file = process.argv[2];
const st = fs.statSync(file);
let bytesSent = 0;
const server = http.createServer((req, res) => {
  if (req.url === '/_bytes') return res.end(String(bytesSent));
  const headers = { 'content-length': String(st.size), etag: `"${st.size}-${st.mtimeMs}"`, 'content-type': 'application/java-archive' };
  if (req.method === 'HEAD') return res.writeHead(200, headers).end();
  res.writeHead(200, headers);
  const stream = fs.createReadStream(file, { highWaterMark: 1024 * 1024 });
  stream.on('data', (c) => (bytesSent += c.length));
  stream.pipe(res);
});
server.listen(0, '127.0.0.1', () => console.log(`FILE_ORIGIN_READY http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
