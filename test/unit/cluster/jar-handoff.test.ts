import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { JarHandoff } from '../../../src/cluster/jar-handoff';
import type { JobManagerClient, JsonResponse } from '../../../src/cluster/jobmanager-client';

const MiB = 1024 * 1024;

/**
 * A JobManager client fake whose uploads wait at a gate, as hand-offs wait for one of the client's
 * connections, then read the body the way `read` says.
 */
function gatedCluster(read: (body: Readable) => Promise<Buffer>) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const bodies: Readable[] = [];
  const received: Buffer[] = [];
  const fake = {
    upload: async (body: Readable): Promise<JsonResponse> => {
      bodies.push(body);
      await gate;
      received.push(await read(body));
      return { status: 200, body: { filename: `/jm/flink-web-upload/${randomUUID()}_app.jar` } };
    },
    json: async (): Promise<JsonResponse> => ({ status: 200, body: {} }),
  };
  // A structural fake: JarHandoff's upload path calls only upload() (and json() to delete).
  return { cluster: fake as unknown as JobManagerClient, bodies, received, open };
}

const readByIteration = async (body: Readable) => {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
};

/** Reads in flowing mode ('data' events through pipe), as undici does. */
const readByPipe = (body: Readable) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk);
        done();
      },
    });
    sink.once('finish', () => resolve(Buffer.concat(chunks)));
    body.once('error', reject);
    body.pipe(sink);
  });

describe('JarHandoff, upload mode', () => {
  let dir: string;
  let jar: Buffer;
  let path: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-handoff-'));
    jar = randomBytes(4 * MiB);
    path = join(dir, 'app.jar');
    writeFileSync(path, jar);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['async iteration', readByIteration],
    ["'data' events (pipe)", readByPipe],
  ])('a hand-off waiting for a connection holds no jar bytes; once read (%s) the body is the whole multipart upload', async (_how, read) => {
    const { cluster, bodies, received, open } = gatedCluster(read);
    const handoff = new JarHandoff('upload', cluster, undefined, pino({ level: 'silent' }));
    const pending = Array.from({ length: 8 }, () => handoff.handOff(path, 'app.jar'));
    await sleep(100);
    expect(bodies).toHaveLength(8);
    // Only the multipart head is buffered: reading at once held ~2 MiB per waiting hand-off.
    for (const b of bodies) expect(b.readableLength).toBeLessThan(1024);
    open();
    const handed = await Promise.all(pending);
    expect(handed.map((h) => h.jarId)).toEqual(handed.map(() => expect.stringMatching(/_app\.jar$/)));
    for (const body of received) {
      const start = body.indexOf('\r\n\r\n') + 4;
      expect(body.subarray(start, start + jar.length).equals(jar)).toBe(true);
      expect(body.subarray(start + jar.length).toString('latin1')).toMatch(/^\r\n--[-\w]+--\r\n$/);
    }
  });
});
