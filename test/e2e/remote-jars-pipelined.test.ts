import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { httpPlugin } from '../../fs-plugins/http';
import { ERROR_CODES, type ErrorCode } from '../../src/errors/codes';
import { filesUnder, json, newJobId, uploadBytes, waitForJobState, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';
import { eventually } from '../helpers/eventually';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { buildJar } from '../helpers/jars';
import { writePaddedJar } from '../helpers/padded-jar';
import { type Fault, type FaultProxy, type ProxiedRequest, startFaultProxy, firstGet, onGet } from '../servers/fault-proxy';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';

const MiB = 1024 * 1024;
const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
/** In every jar name of this file, to find what it left on the JobManager. */
const TAG = `pipe${randomBytes(4).toString('hex')}`;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/**
 * The pipelined upload hand-off (ADR 0008) on the real embedded Flink: with
 * `gateway.artifacts.handoff: upload`, the run that starts a download streams the jar to the
 * JobManager's /v1/jars/upload while it downloads, and writes the multipart body's closing boundary
 * only after every check passed. The origin sits behind a fault proxy (drip, truncate, flip a byte,
 * reset); the JobManager behind a pass-through proxy that shows when an upload started. A jar that
 * fails a check after its upload started must never be registered: not listed by GET /jars, no file
 * of its name in the JobManager's upload directory, no job.
 */
describe('pipelined upload hand-off on the real embedded Flink', () => {
  let dir: string;
  let good: Buffer;
  let origin: HttpOrigin;
  let originProxy: FaultProxy;
  let jmProxy: FaultProxy;
  let gw: TestGateway;
  let placeholder: string;

  /** A 8 MiB WordCount under a fresh name (so a fresh cache key and a name to look for). */
  const names: string[] = [];
  const fresh = (what: string) => {
    const name = `${TAG}-${what}.jar`;
    names.push(name);
    return name;
  };
  const uriOf = (path: string) => `${originProxy.url}${path}`;
  const uploadsStarted = () => jmProxy.log.filter((r) => r.method === 'POST' && r.path.startsWith('/v1/jars/upload')).length;
  const getsOf = (path: string) => origin.requests.filter((r) => r.method === 'GET' && r.path === path).length;
  const handedLine = (jobId: string) => gw.logs.find((l) => l.msg === 'remote jar handed to the JobManager' && l.jobId === jobId);

  /** Jar names on the JobManager (asked directly), and files of that name in its upload directory. */
  async function onJobManager(name: string): Promise<{ listed: boolean; files: string[] }> {
    const listed = await json('GET', `${flinkUrl()}/v1/jars`);
    return {
      listed: (listed.body.files as { name: string }[]).some((f) => f.name === name),
      files: filesUnder(process.env.E2E_FLINK_UPLOAD_DIR ?? '').filter((f) => f.includes(name)),
    };
  }

  const run = (g: TestGateway, holder: string, uri: string, extra: Record<string, string> = {}, jobId = newJobId()) =>
    json('POST', `${g.url}/v1/jars/${holder}/run`, {
      entryClass: WORDCOUNT_CLASS,
      programArgsList: [],
      jobId,
      flinkConfiguration: { 'user.artifacts.job-jar': uri, 'parallelism.default': '1', ...extra },
    }).then((r) => ({ ...r, jobId, code: String((r.body.errors as string[] | undefined)?.[0] ?? '').split(':')[0] }));

  const withPlan = async <T>(proxy: FaultProxy, plan: (req: ProxiedRequest) => Fault, fn: () => Promise<T>): Promise<T> => {
    proxy.setPlan(plan);
    try {
      return await fn();
    } finally {
      proxy.setPlan(() => ({ kind: 'pass' }));
    }
  };

  const gatewayOptions = (extra: Record<string, string> = {}) => ({
    'web.submit.jar-uri.enable': 'true',
    'gateway.artifacts.handoff': 'upload',
    'gateway.artifacts.allowed-schemes': 'http',
    'user.artifacts.raw-http-enabled': 'true',
    'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${originProxy.port}`,
    'gateway.artifacts.fetch-retries': '1',
    ...extra,
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gw-pipelined-'));
    await writePaddedJar(WORDCOUNT_JAR, join(dir, 'padded.jar'), 8 * MiB);
    good = readFileSync(join(dir, 'padded.jar'));
    const files: Record<string, Buffer> = {};
    for (const what of ['ok', 'shared', 'retried', 'flipped', 'pin', 'truncated', 'timeout', 'shutdown'])
      files[`/jobs/${fresh(what)}`] = good;
    files[`/jobs/${fresh('random')}`] = randomBytes(4 * MiB);
    origin = await startHttpOrigin({ files });
    originProxy = await startFaultProxy({ host: '127.0.0.1', port: origin.port });
    const jm = new URL(flinkUrl());
    jmProxy = await startFaultProxy({ host: jm.hostname, port: Number(jm.port) });
    gw = await startGateway(jmProxy.url, gatewayOptions(), [httpPlugin]);
    const up = await uploadBytes(gw.url, [{ name: `${TAG}-placeholder.jar`, bytes: PLACEHOLDER, field: 'file_0' }], { request: '{}' });
    placeholder = String(up.body.filename).split('/').pop()!;
  }, 180_000);

  afterAll(async () => {
    if (placeholder) await json('DELETE', `${flinkUrl()}/v1/jars/${placeholder}`);
    await gw?.close();
    await Promise.all([originProxy?.stop(), jmProxy?.stop(), origin?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('streams the jar to the JobManager while it downloads, runs it to FINISHED; a cached copy is handed off as before', async () => {
    const name = names[0]!;
    const uploads = uploadsStarted();
    const first = await withPlan(originProxy, onGet({ kind: 'drip', bytesPerSecond: 8 * MiB }), async () => {
      const pending = run(gw, placeholder, uriOf(`/jobs/${name}`));
      // Overlap: the JobManager's upload starts while the fetch is still downloading.
      await eventually(() => uploadsStarted() > uploads, 'the upload to the JobManager to start', 120_000);
      const fetches = await json('GET', `${gw.url}/gateway/v1/fetches`);
      const rec = (fetches.body.fetches as { uri: string; phase: string; bytes: number }[]).find((f) => f.uri.endsWith(name));
      expect(rec?.phase).toBe('downloading');
      expect(rec!.bytes).toBeLessThan(good.length);
      return pending;
    });
    expect(first).toMatchObject({ status: 200, body: { jobid: first.jobId } });
    expect(handedLine(first.jobId)).toMatchObject({ handoff: 'upload', pipelined: true, fromCache: false, sha256: sha(good) });
    expect(uploadsStarted() - uploads).toBe(1); // no second upload from the cache
    expect(await waitForJobState(flinkUrl(), first.jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');

    const again = await run(gw, placeholder, uriOf(`/jobs/${name}`));
    expect(again.status).toBe(200);
    expect(handedLine(again.jobId)).toMatchObject({ pipelined: false, fromCache: true });
    expect(getsOf(`/jobs/${name}`)).toBe(1);
    expect(await waitForJobState(flinkUrl(), again.jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    expect(await onJobManager(name)).toEqual({ listed: false, files: [] }); // transient jars deleted
  }, 120_000);

  it('runs of one URI at once share one download: only the first is pipelined, the others hand off from the cache', async () => {
    const name = names[1]!;
    const results = await withPlan(originProxy, onGet({ kind: 'drip', bytesPerSecond: 8 * MiB }), () =>
      Promise.all([0, 1, 2].map(() => run(gw, placeholder, uriOf(`/jobs/${name}`)))),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(getsOf(`/jobs/${name}`)).toBe(1);
    const lines = results.map((r) => handedLine(r.jobId));
    expect(lines.filter((l) => l?.pipelined === true)).toHaveLength(1);
    expect(lines.filter((l) => l?.pipelined === false)).toHaveLength(2);
    for (const r of results) expect(await waitForJobState(flinkUrl(), r.jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    // Each run's transient jar is gone once its answer came (the release is awaited before it).
    const left = await onJobManager(name);
    if (left.listed || left.files.length > 0) {
      const ids = new Set(results.map((r) => r.jobId));
      const logLines = gw.logs.filter((l) => ids.has(String(l.jobId)) || (typeof l.level === 'number' && l.level >= 40));
      const calls = jmProxy.log
        .filter((r) => r.method === 'DELETE' || r.path.startsWith('/v1/jars/upload'))
        .map((r) => `${r.method} ${r.path}`);
      throw new Error(
        `a transient jar of ${name} is left on the JobManager (${JSON.stringify(left)}); gateway lines: ${JSON.stringify(logLines)}; JobManager calls: ${JSON.stringify(calls)}`,
      );
    }
  }, 120_000);

  it('the first GET reset mid-body: the half-sent upload is aborted, the retry is handed off from the cache, one jar runs', async () => {
    const name = names[2]!;
    const uploads = uploadsStarted();
    // The reset comes once the pipelined upload has reached the JobManager: the gateway hands its
    // first bytes on a MiB at a time, so on loopback a reset at a fixed offset can beat the upload.
    const started = () => eventually(() => uploadsStarted() > uploads, 'the pipelined upload to start', 10_000, 10);
    const r = await withPlan(originProxy, firstGet({ kind: 'reset', afterBytes: 3 * MiB, until: started }), () =>
      run(gw, placeholder, uriOf(`/jobs/${name}`)),
    );
    // Seen once under load in CI as a 503 (cause unknown): say what the gateway logged if it recurs.
    if (r.status !== 200)
      console.log('reset mid-body run failed; gateway warnings:', JSON.stringify(gw.logs.filter((l) => Number(l.level) >= 40).slice(-10)));
    expect({ status: r.status, errors: r.body.errors }).toEqual({ status: 200, errors: undefined });
    expect(getsOf(`/jobs/${name}`)).toBe(2);
    expect(uploadsStarted() - uploads).toBe(2); // the aborted pipelined one, then the one from the cache
    expect(handedLine(r.jobId)).toMatchObject({ pipelined: false, fromCache: false });
    expect(await waitForJobState(flinkUrl(), r.jobId, ['FINISHED', 'FAILED'])).toBe('FINISHED');
    // Only the transient jar was ever registered, and it is deleted: the aborted upload left nothing.
    expect(await onJobManager(name)).toEqual({ listed: false, files: [] });
  }, 120_000);

  it.each([
    [
      'a flipped byte, caught by the sha256 pin',
      3,
      () => ({ plan: onGet({ kind: 'corrupt', atBodyByte: 5 * MiB }), pin: sha(good), codes: ['GW_FETCH_DIGEST_MISMATCH'] }),
    ],
    [
      'the right bytes with a wrong sha256 pin (every byte reached the JobManager)',
      4,
      () => ({ plan: onGet({ kind: 'pass' }), pin: 'ab'.repeat(32), codes: ['GW_FETCH_DIGEST_MISMATCH'] }),
    ],
    // Shorter than the size the HEAD announced: a store failure (retried, then 502), or a bad jar.
    [
      'a silent truncation (no Content-Length, clean close)',
      5,
      () => ({
        plan: onGet({ kind: 'truncate', afterBodyBytes: 4 * MiB }),
        pin: undefined,
        codes: ['GW_FETCH_UNAVAILABLE', 'GW_FETCH_NOT_JAR'],
      }),
    ],
    ['random bytes named .jar (not a zip)', 8, () => ({ plan: onGet({ kind: 'pass' }), pin: undefined, codes: ['GW_FETCH_NOT_JAR'] })],
  ])(
    '%s: refused after its upload started, never a jar on the JobManager, no job',
    async (_what, index, setup) => {
      const name = names[index]!;
      const { plan, pin, codes } = setup();
      const uploads = uploadsStarted();
      const r = await withPlan(originProxy, plan, () =>
        run(gw, placeholder, uriOf(`/jobs/${name}`), pin ? { 'gateway.artifacts.job-jar.sha256': pin } : {}),
      );
      expect(codes).toContain(r.code);
      expect(r.status).toBe(ERROR_CODES[r.code as ErrorCode].status);
      expect(uploadsStarted()).toBeGreaterThan(uploads); // the failure came mid-pipeline
      expect((await json('GET', `${flinkUrl()}/v1/jobs/${r.jobId}`)).status).toBe(404);
      await sleep(500); // what an aborted upload might leave would show by now
      expect(await onJobManager(name)).toEqual({ listed: false, files: [] });
    },
    180_000,
  );

  describe('a fetch that times out, and a shutdown, mid-pipeline', () => {
    let quick: TestGateway;
    let holder: string;
    let stopped = false;

    beforeAll(async () => {
      quick = await startGateway(
        jmProxy.url,
        gatewayOptions({ 'user.artifacts.fetch-timeout': '4 s', 'gateway.artifacts.fetch-retries': '0' }),
        [httpPlugin],
      );
      const up = await uploadBytes(quick.url, [{ name: `${TAG}-placeholder2.jar`, bytes: PLACEHOLDER, field: 'file_0' }], {
        request: '{}',
      });
      holder = String(up.body.filename).split('/').pop()!;
    });
    afterAll(async () => {
      if (holder) await json('DELETE', `${flinkUrl()}/v1/jars/${holder}`);
      if (!stopped) await quick?.close();
    });

    it('a body that stalls: 504 GW_FETCH_TIMEOUT, and the upload is aborted with it', async () => {
      const name = names[6]!;
      const uploads = uploadsStarted();
      const r = await withPlan(originProxy, onGet({ kind: 'stall', afterBytes: 2 * MiB }), () =>
        run(quick, holder, uriOf(`/jobs/${name}`)),
      );
      expect({ status: r.status, code: r.code }).toEqual({ status: 504, code: 'GW_FETCH_TIMEOUT' });
      // The gateway records a timed-out fetch with its URI (what the shutdown case below looks for).
      expect(
        quick.logs.some((l) => JSON.stringify(l).includes(name) && /GW_FETCH_TIMEOUT|did not finish within/.test(JSON.stringify(l))),
      ).toBe(true);
      expect(uploadsStarted()).toBeGreaterThan(uploads);
      expect((await json('GET', `${flinkUrl()}/v1/jobs/${r.jobId}`)).status).toBe(404);
      await sleep(500);
      expect(await onJobManager(name)).toEqual({ listed: false, files: [] });
    }, 180_000);

    it('a shutdown while the jar streams: both sides are aborted, the gateway stops, nothing is registered', async () => {
      const name = names[7]!;
      const uploads = uploadsStarted();
      originProxy.setPlan(onGet({ kind: 'stall', afterBytes: 2 * MiB }));
      try {
        const pending = run(quick, holder, uriOf(`/jobs/${name}`)).catch((err: Error) => ({ status: -1, error: err.message }));
        await eventually(() => uploadsStarted() > uploads, 'the upload to the JobManager to start', 120_000);
        stopped = true;
        await quick.close();
        expect((await pending).status).not.toBe(200);
        // The shutdown aborted the fetch; close() did not wait for the 4 s fetch timeout to end it
        // (told by the outcome the gateway recorded, not by the time close() took).
        const records = [
          ...quick.logs,
          ...(() => {
            try {
              return quick.audit();
            } catch {
              return [];
            }
          })(),
        ].map((l) => JSON.stringify(l));
        expect(records.filter((l) => l.includes(name) && /GW_FETCH_TIMEOUT|did not finish within/.test(l))).toEqual([]);
      } finally {
        originProxy.setPlan(() => ({ kind: 'pass' }));
      }
      await sleep(500);
      expect(await onJobManager(name)).toEqual({ listed: false, files: [] });
    }, 180_000);
  });

  it('leaves no jar of this file on the JobManager', async () => {
    const listed = await json('GET', `${flinkUrl()}/v1/jars`);
    expect(
      (listed.body.files as { name: string }[]).map((f) => f.name).filter((n) => n.includes(TAG) && !n.includes('placeholder')),
    ).toEqual([]);
  });
});
