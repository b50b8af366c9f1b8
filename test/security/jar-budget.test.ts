import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { httpPlugin } from '../../fs-plugins/http';
import { errorCode, json, uploadBytes } from '../helpers/flink';
import { startGateway, type TestGateway, writeTokensFile } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { operatorPlaceholderJar } from '../helpers/operator-placeholder';
import { startFakeJobManager, type FakeJobManager } from '../servers/fake-jobmanager';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';

/**
 * Security review round 3, class "resource budgets": every jar the gateway leaves on the JobManager
 * (uploads and POST /jars/fetch results) is charged to one budget per principal, in count and in
 * bytes, reserved when the request is accepted (never checked first and counted after an awaited
 * fetch or body), given back on failure, on delete and when the JobManager no longer lists the jar;
 * plus one byte ceiling for the upload directory, transient jars of runs by URI included while they
 * run. Bursts of concurrent uploads and fetches, on loopback, against a fake JobManager that counts
 * what it holds.
 */

const TOKENS = { alice: 'tok-alice', bob: 'tok-bob' };
const alice = { authorization: `Bearer ${TOKENS.alice}` };
const bob = { authorization: `Bearer ${TOKENS.bob}` };
/** A jar of about `kib` KiB (random, stored: its size is what it takes on the JobManager). */
const jarOf = (kib: number) =>
  buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': 'x', 'pad.bin': randomBytes(kib * 1024) });
const SMALL = jarOf(1);
const JAR_64K = jarOf(64);
const idOf = (r: { body: Record<string, unknown> }) => String(r.body.filename).split('/').pop()!;
const message = (r: { body: Record<string, unknown> }) => String((r.body.errors as string[] | undefined)?.[0] ?? '');

interface Outcomes {
  accepted: string[];
  refused: { status: number; code: string | undefined; message: string }[];
}

/** Sends every request at once and sorts the answers. */
async function burst(calls: (() => Promise<{ status: number; body: Record<string, unknown> }>)[]): Promise<Outcomes> {
  const answers = await Promise.all(calls.map((c) => c()));
  const out: Outcomes = { accepted: [], refused: [] };
  for (const a of answers) {
    if (a.status === 200) out.accepted.push(idOf(a));
    else out.refused.push({ status: a.status, code: errorCode(a), message: message(a) });
  }
  return out;
}

/** POST /jars/upload with a chunked body (no Content-Length): the gateway learns the size only as the bytes arrive. */
function chunkedUpload(
  url: string,
  name: string,
  bytes: Buffer,
  headers: Record<string, string>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const boundary = `----budget${randomBytes(8).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="jarfile"; filename="${name}"\r\nContent-Type: application/java-archive\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}/jars/upload`,
      {
        method: 'POST',
        headers: { ...headers, 'content-type': `multipart/form-data; boundary=${boundary}`, 'transfer-encoding': 'chunked' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>,
          }),
        );
      },
    );
    // The gateway may answer and close before the whole body was sent.
    req.on('error', (err: NodeJS.ErrnoException) => (err.code === 'EPIPE' || err.code === 'ECONNRESET' ? undefined : reject(err)));
    req.write(head);
    for (let at = 0; at < bytes.length; at += 16 * 1024) req.write(bytes.subarray(at, at + 16 * 1024));
    req.end(tail);
  });
}

describe('one budget for the jars the gateway leaves on the JobManager', () => {
  let jm: FakeJobManager;
  let origin: HttpOrigin;
  let dir: string;
  const gateways: TestGateway[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-jar-budget-'));
    writeTokensFile(join(dir, 'tokens'), TOKENS);
    jm = await startFakeJobManager();
    origin = await startHttpOrigin({ files: { '/small.jar': SMALL, '/64k.jar': JAR_64K } });
  });
  afterAll(async () => {
    for (const g of gateways) await g.close();
    await jm.stop();
    await origin.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => jm.jars.clear());

  async function gateway(options: Record<string, string>): Promise<TestGateway> {
    const gw = await startGateway(
      jm.url,
      {
        'gateway.auth.tokens-file': join(dir, 'tokens'),
        'web.submit.jar-uri.enable': 'true',
        'gateway.artifacts.allowed-schemes': 'http',
        'user.artifacts.raw-http-enabled': 'true',
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
        'gateway.artifacts.handoff': 'upload',
        // Every fetch of a burst waits for a slot instead of a 503: the budget, not the queue, decides.
        'gateway.artifacts.fetch-queue-size': '1000',
        ...options,
      },
      [httpPlugin],
    );
    gateways.push(gw);
    return gw;
  }

  const upload = (gw: TestGateway, bytes: Buffer, who: Record<string, string>) => () =>
    uploadBytes(gw.url, [{ name: 'app.jar', bytes }], {}, who);
  const fetch = (gw: TestGateway, path: string, who: Record<string, string>) => () =>
    json('POST', `${gw.url}/v1/jars/fetch`, { uri: `${origin.url}${path}` }, who);

  it('the fetch quota holds under a burst: 300 concurrent fetches by one principal leave at most 256 jars (the race of the check before the fetch)', async () => {
    // Only options that existed before the budget: this burst passed the old check all together.
    const gw = await gateway({});
    const out = await burst(Array.from({ length: 300 }, () => fetch(gw, '/small.jar', alice)));
    expect({ accepted: out.accepted.length, refused: out.refused.length, held: jm.jars.size }).toEqual({
      accepted: 256,
      refused: 44,
      held: 256,
    });
    expect(new Set(out.refused.map((r) => `${r.status} ${r.code}`))).toEqual(new Set(['429 GW_JAR_QUOTA']));
    expect(out.refused[0]!.message).toContain('gateway.jars.max-count-per-principal');
    // A second principal is not charged for the first one's jars.
    expect((await fetch(gw, '/small.jar', bob)()).status).toBe(200);
  }, 120_000);

  it('count: a burst of uploads and fetches past the count leaves exactly the budget; the other principal is unaffected; a delete gives one back', async () => {
    const gw = await gateway({ 'gateway.jars.max-count-per-principal': '5' });
    const calls = [
      ...Array.from({ length: 8 }, () => upload(gw, SMALL, alice)),
      ...Array.from({ length: 8 }, () => fetch(gw, '/small.jar', alice)),
    ];
    const mixed = burst(calls);
    // Bob's burst runs alongside alice's.
    const other = burst(Array.from({ length: 5 }, (_, i) => (i % 2 ? upload(gw, SMALL, bob) : fetch(gw, '/small.jar', bob))));
    const [a, b] = await Promise.all([mixed, other]);
    expect({ accepted: a.accepted.length, refused: a.refused.length }).toEqual({ accepted: 5, refused: 11 });
    expect(new Set(a.refused.map((r) => `${r.status} ${r.code}`))).toEqual(new Set(['429 GW_JAR_QUOTA']));
    expect(a.refused[0]!.message).toMatch(/at most 5 jars .*gateway\.jars\.max-count-per-principal.*DELETE \/jars\/<jarid>/);
    expect(b.accepted).toHaveLength(5);
    expect(jm.jars.size).toBe(10);
    // Full: refused until one of alice's jars is deleted, then one more fits.
    expect(errorCode(await upload(gw, SMALL, alice)())).toBe('GW_JAR_QUOTA');
    expect((await json('DELETE', `${gw.url}/v1/jars/${a.accepted[0]}`, undefined, alice)).status).toBe(200);
    expect((await fetch(gw, '/small.jar', alice)()).status).toBe(200);
    expect(errorCode(await fetch(gw, '/small.jar', alice)())).toBe('GW_JAR_QUOTA');
  }, 60_000);

  it('bytes: a burst of 64 KiB uploads and fetches never leaves more than the byte budget; filling it afterwards ends exactly at the budget', async () => {
    const size = JAR_64K.length;
    const budget = Math.floor(size * 3.5);
    const gw = await gateway({ 'gateway.jars.max-size-per-principal': String(budget) });
    const calls = [
      ...Array.from({ length: 5 }, () => upload(gw, JAR_64K, alice)),
      ...Array.from({ length: 5 }, () => () => chunkedUpload(gw.url, 'app.jar', JAR_64K, alice)),
      ...Array.from({ length: 5 }, () => fetch(gw, '/64k.jar', alice)),
    ];
    const out = await burst(calls);
    const held = [...jm.jars.values()].reduce((n, j) => n + j.size, 0);
    // Bytes are reserved as they arrive, so a burst may even refuse every member (each holding part
    // of the budget when the others' last bytes come): never more than the budget is the promise.
    expect(out.accepted.length).toBeLessThanOrEqual(3);
    expect(held).toBeLessThanOrEqual(budget);
    expect(new Set(out.refused.map((r) => `${r.status} ${r.code}`))).toEqual(new Set(['429 GW_JAR_QUOTA']));
    expect(out.refused[0]!.message).toContain('gateway.jars.max-size-per-principal');
    // Whatever the refused ones had reserved came back: alice fills up to exactly three jars.
    for (let i = out.accepted.length; i < 3; i++) expect((await upload(gw, JAR_64K, alice)()).status).toBe(200);
    expect(errorCode(await chunkedUpload(gw.url, 'app.jar', JAR_64K, alice))).toBe('GW_JAR_QUOTA');
    expect(jm.jars.size).toBe(3);
    expect((await upload(gw, JAR_64K, bob)()).status).toBe(200);
  }, 60_000);

  it('an upload over the byte budget stops while it streams: the JobManager keeps nothing of it and the budget comes back', async () => {
    const gw = await gateway({ 'gateway.jars.max-size-per-principal': String(256 * 1024) });
    const big = jarOf(1024);
    const before = jm.requests.length;
    const r = await chunkedUpload(gw.url, 'big.jar', big, alice);
    expect({ status: r.status, code: errorCode(r) }).toEqual({ status: 429, code: 'GW_JAR_QUOTA' });
    expect(jm.jars.size).toBe(0);
    // A declared length over the budget is refused before the body is read.
    const declared = await upload(gw, big, alice)();
    expect({ status: declared.status, code: errorCode(declared) }).toEqual({ status: 429, code: 'GW_JAR_QUOTA' });
    expect(jm.jars.size).toBe(0);
    expect(jm.requests.length - before).toBeLessThanOrEqual(1);
    expect((await upload(gw, JAR_64K, alice)()).status).toBe(200);
  }, 60_000);

  it('the upload directory has one ceiling for every principal, transient jars of runs by URI included while they run', async () => {
    const size = JAR_64K.length;
    const gw = await gateway({ 'gateway.jars.max-total-size': String(Math.floor(size * 2.5)) });
    const out = await burst([
      ...Array.from({ length: 3 }, () => upload(gw, JAR_64K, alice)),
      ...Array.from({ length: 3 }, () => fetch(gw, '/64k.jar', bob)),
    ]);
    expect(out.accepted.length).toBeLessThanOrEqual(2);
    expect([...jm.jars.values()].reduce((n, j) => n + j.size, 0)).toBeLessThanOrEqual(size * 2.5);
    expect(new Set(out.refused.map((r) => `${r.status} ${r.code}`))).toEqual(new Set(['429 GW_JAR_CEILING']));
    expect(out.refused[0]!.message).toContain('gateway.jars.max-total-size');
    // Fill to two kept jars; a run by URI needs room for its transient jar as well.
    for (let i = out.accepted.length; i < 2; i++) expect((await upload(gw, JAR_64K, alice)()).status).toBe(200);
    const placeholder = await uploadBytes(
      gw.url,
      [{ name: 'empty.jar', bytes: buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' }) }],
      {},
      bob,
    );
    expect(placeholder.status).toBe(200);
    const run = await json(
      'POST',
      `${gw.url}/v1/jars/${idOf(placeholder)}/run`,
      { flinkConfiguration: { 'user.artifacts.job-jar': `${origin.url}/64k.jar` } },
      bob,
    );
    expect({ status: run.status, code: errorCode(run) }).toEqual({ status: 429, code: 'GW_JAR_CEILING' });
    expect(jm.runs).toHaveLength(0);
    const mine = [...jm.jars.keys()].filter((id) => id !== idOf(placeholder));
    expect((await json('DELETE', `${gw.url}/v1/jars/${mine[0]}`, undefined, alice)).status).toBe(200);
    const again = await json(
      'POST',
      `${gw.url}/v1/jars/${idOf(placeholder)}/run`,
      { flinkConfiguration: { 'user.artifacts.job-jar': `${origin.url}/64k.jar` } },
      bob,
    );
    expect(again.status).toBe(200);
    // The transient jar was deleted after the run and its share given back: room for one more kept jar.
    expect((await upload(gw, JAR_64K, bob)()).status).toBe(200);
  }, 60_000);

  it('a jar that left the JobManager without the gateway seeing it (a JobManager restart) gives its budget back: learned from the listing', async () => {
    const gw = await gateway({ 'gateway.jars.max-count-per-principal': '2' });
    const first = await upload(gw, SMALL, alice)();
    expect((await upload(gw, SMALL, alice)()).status).toBe(200);
    jm.jars.delete(idOf(first));
    // The refusal reads the JobManager's listing once and tries again.
    expect((await upload(gw, SMALL, alice)()).status).toBe(200);
    expect(errorCode(await upload(gw, SMALL, alice)())).toBe('GW_JAR_QUOTA');
    // A listing through GET /jars does the same.
    jm.jars.clear();
    expect((await json('GET', `${gw.url}/v1/jars`, undefined, alice)).status).toBe(200);
    const two = await burst([upload(gw, SMALL, alice), fetch(gw, '/small.jar', alice), upload(gw, SMALL, alice)]);
    expect(two.accepted).toHaveLength(2);
    // DELETE of a jar the JobManager no longer has (400, as Flink answers) gives it back too.
    jm.jars.delete(two.accepted[0]!);
    expect((await json('DELETE', `${gw.url}/v1/jars/${two.accepted[0]}`, undefined, alice)).status).toBe(400);
    expect((await upload(gw, SMALL, alice)()).status).toBe(200);
  }, 60_000);
});

describe('fetched-only mode: an upload can only be a placeholder', () => {
  let jm: FakeJobManager;
  let gw: TestGateway;

  beforeAll(async () => {
    jm = await startFakeJobManager();
    gw = await startGateway(jm.url, { 'gateway.policy.mode': 'fetched-only', 'gateway.artifacts.handoff': 'upload' });
  });
  afterAll(async () => {
    await gw.close();
    await jm.stop();
  });

  it("accepts the operator's placeholder; refuses a jar with classes and a jar over gateway.policy.fetched-only.max-upload-size (403), keeping nothing", async () => {
    const placeholder = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: await operatorPlaceholderJar(), field: 'file_0' }], {
      request: '{}',
    });
    expect(placeholder.status).toBe(200);
    const withClasses = await uploadBytes(gw.url, [{ name: 'app.jar', bytes: SMALL }]);
    expect({ status: withClasses.status, code: errorCode(withClasses) }).toEqual({ status: 403, code: 'GW_POLICY_FETCHED_ONLY' });
    const large = await uploadBytes(gw.url, [
      { name: 'big.jar', bytes: buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'pad.bin': randomBytes(96 * 1024) }) },
    ]);
    expect({ status: large.status, code: errorCode(large) }).toEqual({ status: 403, code: 'GW_POLICY_FETCHED_ONLY' });
    expect(message(large)).toContain('gateway.policy.fetched-only.max-upload-size');
    expect([...jm.jars.keys()]).toEqual([idOf(placeholder)]);
  }, 60_000);
});
