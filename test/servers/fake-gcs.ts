import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createReadStream } from 'node:fs';
import { request } from 'node:http';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startChildServer } from './child-server';

export const FAKE_GCS_VERSION = '1.56.1';

/** Where scripts/build-fake-gcs.sh puts the emulator. */
export function fakeGcsBinary(env: NodeJS.ProcessEnv = process.env): string {
  return join(
    env.XDG_CACHE_HOME ?? join(homedir(), '.cache'),
    'flink-jar-gateway',
    'fake-gcs-server',
    `v${FAKE_GCS_VERSION}`,
    'fake-gcs-server',
  );
}

export interface FakeGcs {
  /** The JSON API root, plain http: http://127.0.0.1:<port> */
  url: string;
  port: number;
  child: ChildProcess;
  createBucket(name: string): Promise<void>;
  /** Uploads a Buffer, or a file by path (streamed); returns the object resource's generation, etag and md5Hash. */
  upload(bucket: string, name: string, body: Buffer | string): Promise<{ generation: string; etag: string; md5Hash?: string }>;
  stop(): Promise<void>;
}

/**
 * Starts fake-gcs-server (github.com/fsouza/fake-gcs-server, built by scripts/build-fake-gcs.sh) on
 * 127.0.0.1 over plain http with an in-memory backend. It serves the JSON API's metadata and media
 * reads with ranges, generations, CRC32C and MD5; it checks no credentials (test/servers/fake-gcs-auth.ts
 * puts a token-checking HTTPS front before it). It logs its port as 0, so the port is read from the
 * child's own listening socket.
 */
export async function startFakeGcs(): Promise<FakeGcs> {
  const bin = fakeGcsBinary();
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run bash scripts/build-fake-gcs.sh (npm test's set-up does)`);
  const server = await startChildServer(
    'fake-gcs-server',
    bin,
    ['-scheme', 'http', '-host', '127.0.0.1', '-port', '0', '-backend', 'memory', '-public-host', '127.0.0.1'],
    {
      ready: /server started at/,
    },
  );
  try {
    const port = await listeningPort(server.child.pid!);
    const url = `http://127.0.0.1:${port}`;
    return {
      url,
      port,
      child: server.child,
      async createBucket(name) {
        const res = await fetch(`${url}/storage/v1/b?project=test`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name }),
        });
        if (res.status !== 200 && res.status !== 409)
          throw new Error(`fake-gcs: creating bucket ${name}: ${res.status} ${await res.text()}`);
      },
      upload: (bucket, name, body) => upload(url, bucket, name, body),
      stop: () => server.stop(),
    };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/** The TCP port the process `pid` listens on, from /proc (its socket inode matched in /proc/net/tcp). */
async function listeningPort(pid: number): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const inodes = new Set<string>();
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]!);
      } catch {
        // a descriptor closed meanwhile
      }
    }
    for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is f[1] (hex ip:port), st f[3] (0A = LISTEN), inode f[9].
      if (f[3] === '0A' && f[9] !== undefined && inodes.has(f[9])) return Number.parseInt(f[1]!.split(':')[1]!, 16);
    }
    await sleep(50);
  }
  throw new Error(`fake-gcs-server (pid ${pid}) has no listening socket`);
}

function upload(
  url: string,
  bucket: string,
  name: string,
  body: Buffer | string,
): Promise<{ generation: string; etag: string; md5Hash?: string }> {
  const target = new URL(`${url}/upload/storage/v1/b/${encodeURIComponent(bucket)}/o?uploadType=media&name=${encodeURIComponent(name)}`);
  return new Promise((resolve, reject) => {
    const req = request(target, { method: 'POST', headers: { 'content-type': 'application/java-archive' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) return reject(new Error(`fake-gcs: upload ${bucket}/${name}: ${res.statusCode} ${text}`));
        const o = JSON.parse(text) as { generation: string; etag: string; md5Hash?: string };
        resolve({ generation: String(o.generation), etag: o.etag, ...(o.md5Hash ? { md5Hash: o.md5Hash } : {}) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (typeof body === 'string') createReadStream(body).on('error', reject).pipe(req);
    else req.end(body);
  });
}
