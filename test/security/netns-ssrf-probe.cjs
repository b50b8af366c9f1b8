'use strict';
// Runs INSIDE a network namespace made by test/security/netns-ssrf.ts (ip netns exec): its loopback
// interface also carries 169.254.169.254, fd00:ec2::254 and the "public" address 1.2.3.4, and there
// is no route out. It starts listeners on those addresses, the real gateway binary (dist/, built by
// `npm run build`) in front of a fake JobManager, sends jar URIs through POST /jars/fetch, and
// prints one line: NETNS_REPORT <json>. Plain JavaScript (node: built-ins only) because it runs
// outside jest, under `ip netns exec`.
const { spawn } = require('node:child_process');
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');

const [root, hostsFile, workDir, jarFile] = process.argv.slice(2);
const JAR = fs.readFileSync(jarFile);
const PUBLIC = '1.2.3.4';

function listen(server, port, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server.address().port));
  });
}

function trap(host) {
  const t = { accepted: 0 };
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-length': String(JAR.length) });
    res.end(req.method === 'HEAD' ? undefined : JAR);
  });
  server.on('connection', () => t.accepted++);
  t.server = server;
  t.listen = () => listen(server, 80, host);
  return t;
}

function redirectingOrigin(onRequest) {
  return http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (onRequest && onRequest(req, res, url)) return;
    if (url.pathname === '/to') {
      res.writeHead(302, { location: url.searchParams.get('url') }).end();
      return;
    }
    res.writeHead(200, { 'content-length': String(JAR.length), etag: '"j"', connection: 'close' });
    res.end(req.method === 'HEAD' ? undefined : JAR);
  });
}

async function main() {
  // Binding these proves we are inside the namespace: on the host they are not local addresses.
  const meta4 = trap('169.254.169.254');
  const meta6 = trap('fd00:ec2::254');
  await meta4.listen();
  await meta6.listen();

  const publicRequests = [];
  const publicOrigin = redirectingOrigin((req, res, url) => {
    publicRequests.push(`${req.method} ${url.pathname}`);
    if (url.pathname === '/rebind.jar') {
      // The rebinding: after this first answer, rebind.test points at the metadata address.
      fs.writeFileSync(hostsFile, fs.readFileSync(hostsFile, 'utf8').replace(`${PUBLIC} rebind.test`, '169.254.169.254 rebind.test'));
      res.writeHead(200, { 'content-length': String(JAR.length), etag: '"r"', connection: 'close' });
      res.end(req.method === 'HEAD' ? undefined : JAR);
      return true;
    }
    return false;
  });
  await listen(publicOrigin, 80, PUBLIC);
  const exempt = redirectingOrigin();
  const exemptPort = await listen(exempt, 0, '127.0.0.1');

  const jm = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = req.method === 'POST' && req.url.endsWith('/jars/upload')
        ? { filename: `/tmp/flink-web-upload/${Date.now()}_app.jar`, status: 'success' }
        : {};
      const text = JSON.stringify(body);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(text.length) }).end(text);
    });
  });
  const jmPort = await listen(jm, 0, '127.0.0.1');

  const config = path.join(workDir, 'gateway.yaml');
  fs.writeFileSync(config, [
    `gateway.cluster.rest-url: "http://127.0.0.1:${jmPort}"`,
    'rest.port: 0',
    'web.submit.jar-uri.enable: true',
    'user.artifacts.allowed-schemes: "https;http;s3"',
    'user.artifacts.raw-http-enabled: true',
    `user.artifacts.restricted-hosts.allowed: "127.0.0.1:${exemptPort}"`,
    `gateway.artifacts.cache-dir: "${path.join(workDir, 'cache')}"`,
    'gateway.artifacts.fetch-retries: 0',
    'gateway.log.level: warn',
    's3.access-key: AKIDNETNSPROBE',
    's3.secret-key: netns-probe-secret',
    's3.path.style.access: true',
    's3.endpoint: "http://169.254.169.254:80"',
    'fs.s3a.bucket.meta6.endpoint: "http://[fd00:ec2::254]:80"',
    'fs.s3a.bucket.metaname.endpoint: "http://metadata.test:80"',
    '',
  ].join('\n'));
  const gateway = spawn(process.execPath, [path.join(root, 'bin', 'flink-jar-gateway.js'), '--config', config], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  gateway.stderr.on('data', (d) => (stderr += d));
  const gatewayUrl = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`gateway not ready in 30 s: ${stderr}`)), 30_000);
    gateway.stdout.on('data', (d) => {
      out += d;
      const m = /GATEWAY_URL=(\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    gateway.once('exit', (code) => reject(new Error(`gateway exited ${code}: ${stderr}`)));
  });

  const M = '169.254.169.254';
  const to = (target) => `http://${PUBLIC}/to?url=${encodeURIComponent(target)}`;
  const cases = [
    ['metadata IPv4', `http://${M}/latest/meta-data/app.jar`, 'refused'],
    ['metadata IPv6 (AWS)', 'http://[fd00:ec2::254]/latest/app.jar', 'refused'],
    ['metadata decimal', 'http://2852039166/latest/app.jar', 'refused'],
    ['metadata octal', 'http://0251.0376.0251.0376/latest/app.jar', 'refused'],
    ['metadata hex', 'http://0xa9.0xfe.0xa9.0xfe/latest/app.jar', 'refused'],
    ['metadata short form', 'http://169.254.43518/latest/app.jar', 'refused'],
    ['metadata IPv4-mapped', `http://[::ffff:${M}]/latest/app.jar`, 'refused'],
    ['metadata IPv4-mapped hex', 'http://[::ffff:a9fe:a9fe]/latest/app.jar', 'refused'],
    ['metadata IPv4-compatible', `http://[::${M}]/latest/app.jar`, 'refused'],
    ['metadata NAT64', `http://[64:ff9b::${M}]/latest/app.jar`, 'refused'],
    ['IPv4-compatible loopback [::127.0.0.1]', `http://[::127.0.0.1]:${exemptPort}/app.jar`, 'refused'],
    ['name → metadata IPv4 (/etc/hosts)', 'http://metadata.test/latest/app.jar', 'refused'],
    ['name → metadata IPv6 (/etc/hosts)', 'http://metadata6.test/latest/app.jar', 'refused'],
    ['name → public and metadata (any restricted answer refuses)', 'http://both.test/latest/app.jar', 'refused'],
    ['redirect public → metadata', to(`http://${M}/latest/app.jar`), 'refused'],
    ['redirect public → metadata IPv6', to('http://[fd00:ec2::254]/latest/app.jar'), 'refused'],
    ['redirect public → metadata name', to('http://metadata.test/latest/app.jar'), 'refused'],
    ['redirect public → decimal metadata', to('http://2852039166/latest/app.jar'), 'refused'],
    ['redirect exempt → metadata', `http://127.0.0.1:${exemptPort}/to?url=${encodeURIComponent(`http://${M}/app.jar`)}`, 'refused'],
    ['s3 endpoint metadata IPv4', 's3://bucket/app.jar', 'refused'],
    ['s3 endpoint metadata IPv6', 's3://meta6/app.jar', 'refused'],
    ['s3 endpoint metadata name', 's3://metaname/app.jar', 'refused'],
    ['rebinding', 'http://rebind.test/rebind.jar', 'refused'],
    ['public address', `http://${PUBLIC}/app.jar`, 'fetched'],
    ['public name', 'http://public.test/app.jar', 'fetched'],
  ];
  const results = [];
  for (const [name, uri, expect] of cases) {
    const res = await fetch(`${gatewayUrl}/jars/fetch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ uri }) });
    const body = await res.json().catch(() => ({}));
    const message = Array.isArray(body.errors) ? String(body.errors[0]) : '';
    results.push({ name, uri, expect, status: res.status, code: message.split(':')[0] || undefined, message: message.slice(0, 300) });
  }
  gateway.kill('SIGTERM');
  await new Promise((resolve) => gateway.once('exit', resolve));
  const report = { cases: results, trapConnections: { meta4: meta4.accepted, meta6: meta6.accepted }, publicRequests };
  process.stdout.write(`NETNS_REPORT ${JSON.stringify(report)}\n`);
  for (const s of [meta4.server, meta6.server, publicOrigin, exempt, jm]) s.close();
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`netns probe failed: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
