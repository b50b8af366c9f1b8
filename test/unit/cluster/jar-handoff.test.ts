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
  ])(
    'a hand-off waiting for a connection holds no jar bytes; once read (%s) the body is the whole multipart upload',
    async (_how, read) => {
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
    },
  );
});

describe('JarHandoff: deleting a transient jar', () => {
  /** A JobManager client fake whose DELETE answers follow `answers` (a status, or an error thrown), then 200. */
  const scripted = (answers: (number | Error)[]) => {
    const deletes: string[] = [];
    const fake = {
      upload: async (body: Readable): Promise<JsonResponse> => {
        await readByIteration(body);
        return { status: 200, body: { filename: '/jm/flink-web-upload/0000_app.jar' } };
      },
      json: async (method: string, path: string): Promise<JsonResponse> => {
        deletes.push(`${method} ${path}`);
        const a = answers.shift() ?? 200;
        if (a instanceof Error) throw a;
        return { status: a, body: {} };
      },
    };
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) });
    return { handoff: new JarHandoff('upload', fake as unknown as JobManagerClient, undefined, log, 1), deletes, lines };
  };
  let dir: string;
  let path: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-handoff-del-'));
    path = join(dir, 'app.jar');
    writeFileSync(path, randomBytes(1024));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a 5xx or a dropped connection is tried again, and the jar is deleted', async () => {
    const { handoff, deletes, lines } = scripted([503, new Error('socket hang up')]);
    const jar = await handoff.handOff(path, 'app.jar');
    await jar.release();
    expect(deletes).toEqual(Array(3).fill('DELETE /v1/jars/0000_app.jar'));
    expect(lines.filter((l) => l.level === 40)).toEqual([]);
    expect(lines.map((l) => [l.msg, l.attempt])).toEqual([
      ['deleting a transient jar failed; trying again', 1],
      ['deleting a transient jar failed; trying again', 2],
    ]);
  }, 10_000);

  it('gives up after 3 attempts with one warning that names the jar', async () => {
    const { handoff, deletes, lines } = scripted([502, 502, 502, 502]);
    await (await handoff.handOff(path, 'app.jar')).release();
    expect(deletes).toHaveLength(3);
    const warned = lines.filter((l) => l.level === 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({
      jarId: '0000_app.jar',
      attempts: 3,
      status: 502,
      msg: 'could not delete a transient jar from the JobManager',
    });
  }, 10_000);

  it('a 400 means Flink no longer has the jar; another 4xx is not tried again', async () => {
    const gone = scripted([400]);
    await (await gone.handoff.handOff(path, 'app.jar')).release();
    expect({ deletes: gone.deletes.length, lines: gone.lines }).toEqual({ deletes: 1, lines: [] });
    const refused = scripted([403]);
    await (await refused.handoff.handOff(path, 'app.jar')).release();
    expect(refused.deletes).toHaveLength(1);
    expect(refused.lines.map((l) => [l.level, l.status])).toEqual([[40, 403]]);
  }, 10_000);
});
