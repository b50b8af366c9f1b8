import { randomBytes, randomUUID } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { JarHandoff } from '../../../src/cluster/jar-handoff';
import { whenRoom } from '../../../src/stream-room';
import type { JobManagerClient, JsonResponse } from '../../../src/cluster/jobmanager-client';

const MiB = 1024 * 1024;
const CHUNK = 64 * 1024;

/** What the fake JobManager saw of one upload body. */
interface Seen {
  bytes: Buffer;
  ended: boolean;
  error?: Error;
}

/**
 * A JobManager client fake: each upload waits at a gate (as for one of the client's connections),
 * then reads the body in flowing mode as undici does, `delayMs` per chunk, and answers 200 only
 * if the body ended. `refuse` makes uploads fail at once, like a JobManager that is down.
 */
function fakeCluster(opts: { delayMs?: number; refuse?: boolean } = {}) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const bodies: Readable[] = [];
  const seen: Seen[] = [];
  const fake = {
    upload: async (body: Readable): Promise<JsonResponse> => {
      bodies.push(body);
      if (opts.refuse) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'GW_CLUSTER_UNAVAILABLE' });
      await gate;
      const s: Seen = { bytes: Buffer.alloc(0), ended: false };
      seen.push(s);
      const chunks: Buffer[] = [];
      await new Promise<void>((resolve) => {
        body.on('data', (c: Buffer) => {
          chunks.push(c);
          if (opts.delayMs) {
            body.pause();
            setTimeout(() => body.resume(), opts.delayMs);
          }
        });
        body.once('end', () => {
          s.ended = true;
          resolve();
        });
        body.once('error', (err) => {
          s.error = err;
          resolve();
        });
      });
      s.bytes = Buffer.concat(chunks);
      if (!s.ended) throw Object.assign(new Error('the request body was aborted'), { code: 'UND_ERR_ABORTED' });
      return { status: 200, body: { filename: `/jm/flink-web-upload/${randomUUID()}_app.jar` } };
    },
    json: async (): Promise<JsonResponse> => ({ status: 200, body: {} }),
  };
  // A structural fake: the upload hand-off calls only upload() (and json() to delete).
  return {
    handoff: new JarHandoff('upload', fake as unknown as JobManagerClient, undefined, pino({ level: 'silent' })),
    bodies,
    seen,
    open,
  };
}

/** Writes as the download's meter does: the next chunk only once the tee has room ('drain'). */
const put = (pipe: Writable, c: Buffer): Promise<void> =>
  pipe.write(c) ? Promise.resolve() : new Promise((resolve) => whenRoom(pipe, resolve));

const isPending = async (p: Promise<unknown>) => (await Promise.race([p.then(() => false), sleep(50).then(() => true)])) === true;

describe('PipelinedUpload (the upload hand-off fed while the jar downloads)', () => {
  const jar = randomBytes(4 * MiB);
  const chunks = Array.from({ length: jar.length / CHUNK }, (_, i) => jar.subarray(i * CHUNK, (i + 1) * CHUNK));

  it('holds no jar bytes while it waits for a JobManager connection; completes only on complete()', async () => {
    const { handoff, bodies, seen, open } = fakeCluster();
    const pipe = handoff.pipelined('app.jar');
    const first = put(pipe, chunks[0]!);
    expect(await isPending(first)).toBe(true); // the download waits: nothing reads the body yet
    expect(bodies).toHaveLength(1);
    expect(bodies[0]!.readableLength).toBeLessThan(1024); // the multipart head only
    open();
    await first;
    for (const c of chunks.slice(1)) await put(pipe, c);
    await sleep(20);
    expect(seen[0]!.ended).toBe(false); // every byte sent, but no closing boundary yet
    const handed = await pipe.complete();
    expect(handed?.jarId).toMatch(/_app\.jar$/);
    const body = seen[0]!.bytes;
    const start = body.indexOf('\r\n\r\n') + 4;
    expect(body.subarray(start, start + jar.length).equals(jar)).toBe(true);
    expect(body.subarray(start + jar.length).toString('latin1')).toMatch(/^\r\n--[-\w]+--\r\n$/);
  });

  it('a slow JobManager sets the pace: writes wait, and the body buffers at most its two 1 MiB buffers', async () => {
    const { handoff, bodies, open } = fakeCluster({ delayMs: 2 });
    open();
    const pipe = handoff.pipelined('app.jar');
    let most = 0;
    let waited = 0;
    for (const c of chunks) {
      let settled = false;
      const w = put(pipe, c).then(() => (settled = true));
      await new Promise(setImmediate);
      if (!settled) waited++;
      await w;
      most = Math.max(most, bodies[0]!.readableLength + (bodies[0] as unknown as { writableLength: number }).writableLength);
    }
    expect(waited).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(2 * MiB + CHUNK);
    expect(await pipe.complete()).toBeDefined();
  });

  it('destroy() abandons the body: the JobManager never sees its end, and a waiting write returns', async () => {
    const { handoff, seen, open } = fakeCluster({ delayMs: 50 });
    open();
    const pipe = handoff.pipelined('app.jar');
    // Write until a write waits for room (the JobManager reads one chunk per 50 ms).
    let waiting: Promise<void> | undefined;
    for (const c of chunks) {
      let settled = false;
      const w = put(pipe, c).then(() => {
        settled = true;
      });
      await new Promise(setImmediate);
      if (!settled) {
        waiting = w;
        break;
      }
    }
    expect(waiting).toBeDefined();
    pipe.destroy(new Error('GW_FETCH_NOT_JAR'));
    await waiting;
    await sleep(20);
    expect(seen[0]!.ended).toBe(false);
    expect(seen[0]!.error?.message).toBe('GW_FETCH_NOT_JAR');
    expect(seen[0]!.bytes.toString('latin1')).not.toMatch(/--\r\n$/);
  });

  it('an upload that fails early does not stall the download, and complete() says to hand off from the cache', async () => {
    const { handoff } = fakeCluster({ refuse: true });
    const pipe = handoff.pipelined('app.jar');
    for (const c of chunks) await put(pipe, c);
    expect(await pipe.complete()).toBeUndefined();
  });

  it('complete() without any write (nothing was downloaded through it) is undefined', async () => {
    const { handoff, bodies } = fakeCluster();
    expect(await handoff.pipelined('app.jar').complete()).toBeUndefined();
    expect(bodies).toHaveLength(0);
  });

  it('is refused in shared-dir mode', () => {
    const handoff = new JarHandoff('shared-dir', {} as JobManagerClient, '/tmp/x', pino({ level: 'silent' }));
    expect(() => handoff.pipelined('app.jar')).toThrow(/handoff: upload/);
  });
});
