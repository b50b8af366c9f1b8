import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { json, newJobId, printFailure, uploadBytes, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../helpers/flink';
import { flinkUrl } from '../helpers/gateway';
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process';
import { buildJar } from '../helpers/jars';
import { writePaddedJar } from '../helpers/padded-jar';
import { startAzurite, uploadBlob, type Azurite } from '../servers/azurite';
import { startFaultProxy, type FaultProxy } from '../servers/fault-proxy';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';
import { putObject, startS3Server, type S3Server } from '../servers/s3-server';

const MiB = 1024 * 1024;
const REQUESTS = 200;
/** Runs are few: each one starts a real job on the 4-slot cluster (cancelled as soon as it is accepted). */
const RUNS = 16;
const PLANS = 60;
const PER_STORE = 4;
/**
 * Every request is bounded: a hang fails the test instead of stalling it. Generous, so that 200
 * requests at once on a busy machine are not taken for a hang.
 */
const REQUEST_TIMEOUT_MS = 240_000;
/**
 * Generous: about 100 MiB is seen with the upload hand-off (at most 64 JobManager connections, each
 * with its body's buffers), 45 MiB with shared-dir. Before the fix in JarHandoff it was ~1 MiB per
 * request in flight (150–175 MiB here, 430 MiB with 400 requests).
 */
const RSS_BOUND = 300 * MiB;

/** A tag in every object and jar name of this run, to find what it left on the JobManager. */
const TAG = `load${randomBytes(4).toString('hex')}`;
const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });
const S3_KEY = { accessKeyId: 'AKIDLOAD', secretAccessKey: `load-${randomBytes(8).toString('hex')}` };
const AZ = { name: 'loadacct', key: randomBytes(64).toString('base64') };

type Kind = 'fetch' | 'plan' | 'run';

/** One distinct object: where it is, and how its GETs are counted at its origin. */
interface StoredJar {
  uri: string;
  /** The request path the origin (or the proxy in front of it) sees, without the query. */
  path: string;
  store: 'http' | 's3' | 'azure';
}

interface Outcome {
  kind: Kind;
  jar: number;
  status?: number;
  body?: Record<string, unknown>;
  retryAfter?: string;
  /** A transport error or the request timeout: must never happen. */
  error?: string;
  /** Status of the clean-up that followed a 200: DELETE of the fetched jar, cancel of the job. */
  cleanup?: number;
  ms: number;
}

function rssOf(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** `runs` runs, `plans` plans, fetches for the rest, over the jars in turn; shuffled deterministically so kinds and stores interleave. */
function mixOf(jars: number, runs: number, plans: number): { kind: Kind; jar: number }[] {
  const out: { kind: Kind; jar: number }[] = [];
  for (let i = 0; i < REQUESTS; i++) out.push({ kind: i < runs ? 'run' : i < runs + plans ? 'plan' : 'fetch', jar: i % jars });
  let seed = 42;
  for (let i = out.length - 1; i > 0; i--) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const j = seed % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/**
 * A bounded load test on loopback: a gateway process in front of the real embedded Flink, with
 * three kinds of origin (a node:http origin, the SigV4-checking S3 server, Azurite; the two stores
 * behind a pass-through fault proxy that counts requests) holding 12 distinct jars (WordCount
 * copies made distinct by a random padding entry, 2–5 MiB). 200 requests are started at once: POST
 * /jars/fetch (then DELETE), plan by URI and run by URI (then cancel). Each answer must be a 200 or
 * a clean 429/503 with Flink's error envelope; every object is downloaded once; the gateway's RSS
 * stays bounded; nothing of the test stays running or registered on the JobManager. The gateway
 * hands jars over with the upload hand-off, its default when it does not share web.upload.dir
 * with the JobManager, and the one whose memory depends on load.
 */
(process.env.SKIP_EMBEDDED_FLINK === '1' ? describe.skip : describe)(
  '200 concurrent fetch/plan/run requests over mixed URIs (real Flink, loopback)',
  () => {
    let dir: string;
    let origin: HttpOrigin;
    let s3: S3Server;
    let azurite: Azurite;
    let s3Proxy: FaultProxy;
    let azProxy: FaultProxy;
    const gateways: GatewayProcess[] = [];
    const jars: StoredJar[] = [];
    const warmups: StoredJar[] = [];
    // Up to all 200 requests on their own connections, so that none waits in the client.
    const client = new Agent({ connections: REQUESTS + 16, headersTimeout: 0, bodyTimeout: 0 });

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'gw-load-'));
      // 12 distinct WordCount jars of 2–5 MiB, plus one small warm-up jar per store.
      const files: { name: string; path: string }[] = [];
      for (let i = 0; i < 3 * PER_STORE + 3; i++) {
        const name = `${TAG}-${i}.jar`;
        const path = join(dir, name);
        const pad = i < 3 * PER_STORE ? 2 * MiB + Math.floor((i * 3 * MiB) / (3 * PER_STORE - 1)) : 256 * 1024;
        await writePaddedJar(WORDCOUNT_JAR, path, pad);
        files.push({ name, path });
      }
      const byStore = (s: number) =>
        files.filter((_, i) => (i < 3 * PER_STORE ? Math.floor(i / PER_STORE) === s : i - 3 * PER_STORE === s));
      [origin, s3, azurite] = await Promise.all([
        startHttpOrigin({ files: Object.fromEntries(byStore(0).map((f) => [`/jobs/${f.name}`, readFileSync(f.path)])) }),
        startS3Server({ keys: { [S3_KEY.accessKeyId]: S3_KEY.secretAccessKey }, buckets: ['load-jars'] }),
        startAzurite({ accounts: [AZ] }),
      ]);
      for (const f of byStore(1)) await putObject(s3.url, S3_KEY, 'load-jars', `jobs/${f.name}`, f.path);
      for (const f of byStore(2)) await uploadBlob(azurite, AZ, 'jars', `jobs/${f.name}`, f.path);
      s3Proxy = await startFaultProxy({ host: '127.0.0.1', port: s3.port });
      azProxy = await startFaultProxy({ host: '127.0.0.1', port: azurite.port });
      const stored = (f: { name: string }, s: number): StoredJar =>
        s === 0
          ? { uri: `${origin.url}/jobs/${f.name}`, path: `/jobs/${f.name}`, store: 'http' }
          : s === 1
            ? { uri: `s3://load-jars/jobs/${f.name}`, path: `/load-jars/jobs/${f.name}`, store: 's3' }
            : {
                uri: `wasbs://jars@${AZ.name}.blob.core.windows.net/jobs/${f.name}`,
                path: `/${AZ.name}/jars/jobs/${f.name}`,
                store: 'azure',
              };
      for (let s = 0; s < 3; s++) {
        const [a, b, c, d, warm] = byStore(s);
        jars.push(...[a!, b!, c!, d!].map((f) => stored(f, s)));
        warmups.push(stored(warm!, s));
      }
    }, 300_000);

    afterAll(async () => {
      for (const g of gateways) g.kill();
      await client.close();
      await Promise.all([s3Proxy?.stop(), azProxy?.stop(), origin?.stop(), s3?.stop(), azurite?.stop()]);
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** A gateway process with its own (empty) cache, allowed to fetch from the three origins. */
    async function startLoadGateway(name: string, extra: Record<string, string | number> = {}): Promise<GatewayProcess> {
      // Credentials in a 0600 config file: templated Azure keys have no env form, and -D would show them in ps.
      const config = join(dir, `${name}.yaml`);
      const settings: Record<string, string | number | boolean> = {
        'gateway.cluster.rest-url': flinkUrl(),
        'rest.port': 0,
        'gateway.artifacts.cache-dir': join(dir, `${name}-cache`),
        'web.submit.jar-uri.enable': true,
        'gateway.artifacts.allowed-schemes': 'http;s3;wasbs',
        'user.artifacts.raw-http-enabled': true,
        'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port};127.0.0.1:${s3Proxy.port};127.0.0.1:${azProxy.port}`,
        's3.endpoint': s3Proxy.url,
        's3.path.style.access': true,
        's3.access-key': S3_KEY.accessKeyId,
        's3.secret-key': S3_KEY.secretAccessKey,
        [`fs.azure.account.key.${AZ.name}.blob.core.windows.net`]: AZ.key,
        [`fs.azure.account.endpoint.${AZ.name}`]: `${azProxy.url}/${AZ.name}`,
        ...extra,
      };
      writeFileSync(
        config,
        Object.entries(settings)
          .map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`)
          .join(''),
        { mode: 0o600 },
      );
      const gw = await startGatewayProcess(['--config', config]);
      gateways.push(gw);
      return gw;
    }

    async function call(gw: GatewayProcess, method: 'GET' | 'POST' | 'DELETE' | 'PATCH', path: string, body?: unknown) {
      const res = await request(`${gw.url}${path}`, {
        method,
        dispatcher: client,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      });
      const text = await res.body.text();
      const retryAfter = res.headers['retry-after'];
      return {
        status: res.statusCode,
        body: (text ? JSON.parse(text) : {}) as Record<string, unknown>,
        ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
      };
    }

    /** The request itself, then its clean-up: DELETE the fetched jar, cancel the accepted job. */
    async function one(
      gw: GatewayProcess,
      placeholder: string,
      kind: Kind,
      jar: StoredJar,
      jobIds: string[],
    ): Promise<Omit<Outcome, 'kind' | 'jar' | 'ms'>> {
      const flinkConfiguration = { 'user.artifacts.job-jar': jar.uri, 'parallelism.default': '1' };
      try {
        if (kind === 'fetch') {
          const r = await call(gw, 'POST', '/jars/fetch', { uri: jar.uri });
          if (r.status !== 200) return r;
          return { ...r, cleanup: (await call(gw, 'DELETE', `/jars/${String(r.body.filename).split('/').pop()}`)).status };
        }
        if (kind === 'plan')
          return await call(gw, 'POST', `/jars/${placeholder}/plan`, { entryClass: WORDCOUNT_CLASS, flinkConfiguration });
        const jobId = newJobId();
        jobIds.push(jobId);
        const r = await call(gw, 'POST', `/v1/jars/${placeholder}/run`, {
          entryClass: WORDCOUNT_CLASS,
          programArgsList: [],
          jobId,
          flinkConfiguration,
        });
        if (r.status !== 200) return r;
        return { ...r, cleanup: (await call(gw, 'PATCH', `/jobs/${jobId}?mode=cancel`)).status };
      } catch (err) {
        return { error: `${(err as Error).name}: ${(err as Error).message}` };
      }
    }

    /** Starts every request of `mix` before awaiting any; returns when all have ended (clean-ups included). */
    async function fire(gw: GatewayProcess, placeholder: string, mix: { kind: Kind; jar: number }[]) {
      const jobIds: string[] = [];
      let lastStarted = 0;
      let firstSettled = Number.POSITIVE_INFINITY;
      const t0 = performance.now();
      const outcomes = await Promise.all(
        mix.map(async ({ kind, jar }): Promise<Outcome> => {
          const started = performance.now();
          lastStarted = Math.max(lastStarted, started);
          const r = await one(gw, placeholder, kind, jars[jar]!, jobIds);
          firstSettled = Math.min(firstSettled, performance.now());
          return { kind, jar, ms: performance.now() - started, ...r };
        }),
      );
      return { outcomes, jobIds, wallMs: performance.now() - t0, allInFlightTogether: lastStarted < firstSettled };
    }

    /** GETs so far of each object at its origin (the stores' counts come from the proxy in front of them). */
    const getsPerObject = () =>
      jars.map((j) => {
        const seen = j.store === 'http' ? origin.requests : (j.store === 's3' ? s3Proxy : azProxy).log;
        return seen.filter((r) => r.method === 'GET' && r.path.split('?')[0] === j.path).length;
      });

    /** A 200 with the body its route answers, or a clean 429/503: Flink's envelope, and Retry-After on a 503. */
    function expectClean(outcomes: Outcome[]): void {
      const other = outcomes.filter((o) => o.status !== 200 && o.status !== 429 && o.status !== 503);
      expect(other.map((o) => ({ kind: o.kind, status: o.status, error: o.error, body: o.body, ms: Math.round(o.ms) }))).toEqual([]);
      for (const o of outcomes) {
        if (o.status !== 200) {
          expect(o.body).toEqual({ errors: [expect.stringMatching(/^GW_[A-Z_]+: /)] });
          if (o.status === 503) expect(o.retryAfter).toMatch(/^\d+$/);
        } else if (o.kind === 'fetch') {
          expect(o.body).toMatchObject({ status: 'success', filename: expect.stringContaining(TAG) });
          expect(o.cleanup).toBe(200);
        } else if (o.kind === 'plan') {
          expect(o.body).toMatchObject({ plan: { name: 'WordCount' } });
        } else {
          expect(o.body).toEqual({ jobid: expect.stringMatching(/^[0-9a-f]{32}$/) });
          expect([202, 409]).toContain(o.cleanup); // 409: the job had already finished on its own
        }
      }
    }

    /** Jar names of this test still on the JobManager. */
    async function jarsLeft(): Promise<string[]> {
      const listed = await json('GET', `${flinkUrl()}/v1/jars`);
      return (listed.body.files as { name: string }[]).map((f) => f.name).filter((n) => n.includes(TAG));
    }

    const tally = (outcomes: Outcome[]) => {
      const count = (p: (o: Outcome) => boolean) => outcomes.filter(p).length;
      const kinds = (['fetch', 'plan', 'run'] as const).map((k) => `${k} ${count((o) => o.kind === k)}`).join(', ');
      return `requests ${outcomes.length} (${kinds}), 200s ${count((o) => o.status === 200)}, 429s ${count((o) => o.status === 429)}, 503s ${count((o) => o.status === 503)}, other ${count((o) => o.status !== 200 && o.status !== 429 && o.status !== 503)}`;
    };

    it('every request ends in 200 or a clean 429/503, one GET per object, bounded RSS, nothing left behind', async () => {
      const gw = await startLoadGateway('main');
      const up = await uploadBytes(gw.url, [{ name: `${TAG}-placeholder.jar`, bytes: PLACEHOLDER }]);
      expect(up.status).toBe(200);
      const placeholder = String(up.body.filename).split('/').pop()!;
      // Warm-up, one object per store (not counted): loads each plugin's code, so the RSS baseline
      // below is the gateway at work, not the gateway before it first touched an SDK.
      for (const w of warmups) {
        const r = await call(gw, 'POST', '/jars/fetch', { uri: w.uri });
        expect(r.status).toBe(200);
        expect((await call(gw, 'DELETE', `/jars/${String(r.body.filename).split('/').pop()}`)).status).toBe(200);
      }
      await sleep(500);
      const pid = gw.child.pid!;
      const baseline = rssOf(pid);
      let peak = baseline;
      const sampler = setInterval(() => {
        try {
          peak = Math.max(peak, rssOf(pid));
        } catch {
          /* the process is gone: the requests fail and say so */
        }
      }, 100);
      let result: Awaited<ReturnType<typeof fire>>;
      try {
        result = await fire(gw, placeholder, mixOf(jars.length, RUNS, PLANS));
      } finally {
        clearInterval(sampler);
      }
      const { outcomes, jobIds, wallMs } = result;
      peak = Math.max(peak, rssOf(pid));

      // No job of this test still running: each accepted run was cancelled at once.
      const states: Record<string, number> = {};
      for (const jobId of jobIds) {
        let state = 'unknown';
        for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(250)) {
          const r = await json('GET', `${flinkUrl()}/v1/jobs/${jobId}`);
          state = r.status === 404 ? 'NOT_SUBMITTED' : String(r.body.state);
          if (['CANCELED', 'FINISHED', 'FAILED', 'NOT_SUBMITTED'].includes(state)) break;
        }
        states[state] = (states[state] ?? 0) + 1;
        if (state === 'FAILED') await printFailure(flinkUrl(), jobId);
      }
      expect((await call(gw, 'DELETE', `/jars/${placeholder}`)).status).toBe(200);
      const left = await jarsLeft();
      const gets = getsPerObject();
      const growth = peak - baseline;
      console.log(
        `load summary: ${tally(outcomes)}, GETs per object [${gets.join(',')}], ` +
          `peak RSS growth ${(growth / MiB).toFixed(1)} MiB (baseline ${(baseline / MiB).toFixed(1)} MiB), ` +
          `slowest ${Math.round(Math.max(...outcomes.map((o) => o.ms)))} ms, wall ${Math.round(wallMs)} ms, jobs ${JSON.stringify(states)}, jars left ${left.length}`,
      );

      expect(result.allInFlightTogether).toBe(true);
      expectClean(outcomes);
      // Every object was asked for and served, and downloaded exactly once.
      for (let i = 0; i < jars.length; i++) expect(outcomes.filter((o) => o.jar === i && o.status === 200).length).toBeGreaterThan(0);
      expect(gets).toEqual(jars.map(() => 1));
      expect(growth).toBeLessThan(RSS_BOUND);
      expect(Object.keys(states).filter((s) => !['CANCELED', 'FINISHED', 'NOT_SUBMITTED'].includes(s))).toEqual([]);
      expect(left).toEqual([]);
    }, 900_000);

    it('with a tight fetch queue the excess gets a clean 503 GW_FETCH_BUSY with Retry-After, and still no object is downloaded twice', async () => {
      // 1 fetch at a time, 2 waiting: 12 distinct objects asked for at once cannot all be taken.
      const gw = await startLoadGateway('tight', { 'user.artifacts.max-concurrent-fetches': 1, 'gateway.artifacts.fetch-queue-size': 2 });
      const before = getsPerObject();
      const { outcomes, wallMs, allInFlightTogether } = await fire(gw, '', mixOf(jars.length, 0, 0));
      const gets = getsPerObject().map((n, i) => n - before[i]!);
      const left = await jarsLeft();
      console.log(
        `load summary (tight queue): ${tally(outcomes)}, GETs per object [${gets.join(',')}], wall ${Math.round(wallMs)} ms, jars left ${left.length}`,
      );

      expect(allInFlightTogether).toBe(true);
      expectClean(outcomes);
      const busy = outcomes.filter((o) => o.status === 503);
      expect(busy.length).toBeGreaterThan(0);
      for (const o of busy) expect(String((o.body!.errors as string[])[0])).toMatch(/^GW_FETCH_BUSY: /);
      // An object is downloaded once if any request for it got through, else not at all.
      expect(gets).toEqual(jars.map((_, i) => (outcomes.some((o) => o.jar === i && o.status === 200) ? 1 : 0)));
      expect(left).toEqual([]);
    }, 600_000);
  },
);
