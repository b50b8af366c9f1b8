import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { slabFileStream, slabPool } from '../../../src/download/slab-pool';
import { eventually } from '../../helpers/eventually';
import { pooledChunks } from '../../helpers/slabs';
import { streamedPost, uploadAgent } from '../../../src/cluster/streamed-upload';

const MiB = 1024 * 1024;

interface Received {
  bytes: Buffer;
  ended: boolean;
  /** The request is over for the server, whole or cut off. */
  closed: boolean;
}

/** A real HTTP server standing in for the JobManager's upload handler. */
async function server(answer: (req: http.IncomingMessage, res: http.ServerResponse, got: Received) => void) {
  const received: Received[] = [];
  const s = http.createServer((req, res) => {
    const got: Received = { bytes: Buffer.alloc(0), ended: false, closed: false };
    received.push(got);
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => {
      got.ended = true;
      got.bytes = Buffer.concat(parts);
    });
    req.on('error', () => undefined);
    req.on('close', () => {
      got.closed = true;
    });
    answer(req, res, got);
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const url = new URL(`http://127.0.0.1:${(s.address() as AddressInfo).port}/v1/jars/upload`);
  return { url, received, close: () => new Promise<void>((resolve) => s.close(() => resolve())) };
}

const answerWhenEnded = (req: http.IncomingMessage, res: http.ServerResponse) =>
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"filename":"/jm/x.jar"}'));

/** One upload exchange's set-up: the server, and an agent (the gateway's unless given), both closed after `fn`. */
async function withServer(
  answer: Parameters<typeof server>[0],
  fn: (jm: Awaited<ReturnType<typeof server>>, agent: http.Agent) => Promise<void>,
  agent: http.Agent = uploadAgent(false),
) {
  const jm = await server(answer);
  try {
    await fn(jm, agent);
  } finally {
    agent.destroy();
    await jm.close();
  }
}

describe('streamedPost (the JobManager upload)', () => {
  it('sends every byte, chunked, and gives each pooled chunk back once the socket is done with it', async () => {
    await withServer(answerWhenEnded, async (jm, agent) => {
      const bytes = randomBytes(6 * MiB + 123);
      const chunks = [...pooledChunks(bytes)];
      const slabs = new Set(chunks.map((c) => c.buffer));
      const answer = await streamedPost(agent, jm.url, 'multipart/form-data; boundary=x', Readable.from(chunks));
      expect(answer).toEqual({ status: 200, text: '{"filename":"/jm/x.jar"}' });
      expect(jm.received[0]!.bytes.equals(bytes)).toBe(true);
      // Every slab came back: the pool hands them out again.
      const again = Array.from({ length: chunks.length }, () => slabPool.take());
      expect(again.filter((s) => slabs.has(s.buffer)).length).toBe(chunks.length);
      for (const s of again) slabPool.retire(s);
    });
  });

  it('a body that fails before its end destroys the request: the server never sees its end', async () => {
    await withServer(answerWhenEnded, async (jm, agent) => {
      const body = new Readable({ read() {} });
      body.push(randomBytes(64 * 1024));
      const sent = streamedPost(agent, jm.url, 'application/octet-stream', body);
      await eventually(() => jm.received.length === 1, 'the JobManager to have the request', 20_000, 10);
      body.destroy(new Error('the store checksum did not match'));
      await expect(sent).rejects.toThrow('the store checksum did not match');
      await eventually(() => jm.received[0]!.closed, 'the request to be over for the JobManager', 20_000, 10);
      expect(jm.received).toHaveLength(1);
      expect(jm.received[0]!.ended).toBe(false);
    });
  });

  it('an answer before the body ends settles the upload, and the body is no longer read', async () => {
    await withServer(
      (_req, res) => res.writeHead(413, { connection: 'close' }).end('{"errors":["too large"]}'),
      async (jm, agent) => {
        let reads = 0;
        const endless = new Readable({
          read() {
            reads++;
            this.push(Buffer.alloc(64 * 1024));
          },
        });
        const answer = await streamedPost(agent, jm.url, 'application/octet-stream', endless);
        expect(answer.status).toBe(413);
        expect(answer.text).toContain('too large');
        const at = reads;
        await sleep(100);
        expect(reads - at).toBeLessThan(20);
        endless.destroy();
      },
    );
  });

  it('reads the body only once a connection takes the request', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    const answer = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const hold = first;
      first = false;
      req.on('end', () => void (hold ? held : Promise.resolve()).then(() => res.writeHead(200).end('{}')));
    };
    await withServer(
      answer,
      async (jm, agent) => {
        const a = streamedPost(agent, jm.url, 'application/octet-stream', Readable.from([Buffer.from('first')]));
        await sleep(50);
        let read = false;
        const body = new Readable({
          read() {
            read = true;
            this.push(Buffer.from('second'));
            this.push(null);
          },
        });
        const b = streamedPost(agent, jm.url, 'application/octet-stream', body);
        await sleep(100);
        expect(read).toBe(false); // queued behind the first: holds no bytes
        release();
        expect((await a).status).toBe(200);
        expect((await b).status).toBe(200);
        expect(read).toBe(true);
        expect(jm.received[1]!.bytes.toString()).toBe('second');
      },
      new http.Agent({ maxSockets: 1 }),
    );
  });

  it('its signal aborts the exchange', async () => {
    await withServer(answerWhenEnded, async (jm, agent) => {
      const body = new Readable({ read() {} });
      const ac = new AbortController();
      const sent = streamedPost(agent, jm.url, 'application/octet-stream', body, ac.signal);
      body.push(Buffer.from('part'));
      await sleep(50);
      ac.abort(new Error('the gateway is shutting down'));
      await expect(sent).rejects.toThrow('the gateway is shutting down');
      body.destroy();
    });
  });
});

describe('slabFileStream', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'slab-file-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads a file in pooled slabs that a recycling consumer gets back', async () => {
    const bytes = randomBytes(3 * MiB + 77);
    const path = join(dir, 'a.jar');
    writeFileSync(path, bytes);
    const parts: Buffer[] = [];
    const slabs = new Set<ArrayBufferLike>();
    for await (const chunk of slabFileStream(path) as AsyncIterable<Buffer>) {
      parts.push(Buffer.from(chunk)); // a copy: the slab goes back now
      slabs.add(chunk.buffer);
      slabPool.recycle(chunk);
    }
    expect(Buffer.concat(parts).equals(bytes)).toBe(true);
    // One slab serves the whole file when every chunk comes back before the next read.
    expect(slabs.size).toBe(1);
  });

  it('an empty file ends at once; a missing one fails the stream', async () => {
    const empty = join(dir, 'empty.jar');
    writeFileSync(empty, '');
    const seen: Buffer[] = [];
    for await (const chunk of slabFileStream(empty) as AsyncIterable<Buffer>) seen.push(chunk);
    expect(seen).toEqual([]);
    await expect(
      (async () => {
        for await (const _ of slabFileStream(join(dir, 'missing.jar'))) void _;
      })(),
    ).rejects.toThrow(/ENOENT/);
  });
});
