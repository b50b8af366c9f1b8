'use strict';
// A plain HTTP origin in its own process serving the files of one directory from disk, like
// test/servers/file-origin.cjs (streamed in 1 MiB reads, content-length, ETag) but for several
// files: the LAST path segment names the file, so /any/prefix/<name> serves <dir>/<name> and every
// prefix is a distinct URI (a cache miss) for the same bytes. GET /_bytes answers the number of
// object bytes sent so far (to count what a resubmission transfers). It serves single byte ranges
// (Accept-Ranges: bytes, 206/416) and honours If-Match against its strong ETag (412), as object
// stores and CDNs do, so that the gateway's parallel ranged reads can be measured against it.
// Usage: node jar-origin.cjs <dir> ; prints "JAR_ORIGIN_READY http://127.0.0.1:<port>".
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');

const dir = process.argv[2];
let bytesSent = 0;
const server = http.createServer((req, res) => {
  const pathname = (req.url || '/').split('?')[0];
  if (pathname === '/_bytes') return res.end(String(bytesSent));
  const name = path.basename(decodeURIComponent(pathname));
  const file = path.join(dir, name);
  let st;
  try {
    st = fs.statSync(file);
  } catch {
    return res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  }
  const etag = `"${st.size}-${Math.round(st.mtimeMs)}"`;
  const headers = {
    'content-length': String(st.size),
    etag,
    'last-modified': st.mtime.toUTCString(),
    'content-type': 'application/java-archive',
    'accept-ranges': 'bytes',
  };
  const ifMatch = req.headers['if-match'];
  if (ifMatch !== undefined && !ifMatch.split(',').some((t) => t.trim() === etag || t.trim() === '*')) return res.writeHead(412, { etag }).end();
  let start = 0;
  let end = st.size - 1;
  let status = 200;
  const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
  if (req.headers.range !== undefined) {
    if (!range || Number(range[1]) >= st.size) return res.writeHead(416, { 'content-range': `bytes */${st.size}` }).end();
    start = Number(range[1]);
    end = range[2] === '' ? st.size - 1 : Math.min(Number(range[2]), st.size - 1);
    status = 206;
    headers['content-range'] = `bytes ${start}-${end}/${st.size}`;
    headers['content-length'] = String(end - start + 1);
  }
  if (req.method === 'HEAD') return res.writeHead(status, headers).end();
  res.writeHead(status, headers);
  const stream = fs.createReadStream(file, { highWaterMark: 1024 * 1024, start, end });
  stream.on('data', (c) => (bytesSent += c.length));
  stream.on('error', () => res.destroy());
  stream.pipe(res);
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => console.log(`JAR_ORIGIN_READY http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
