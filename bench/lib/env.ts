import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { request } from 'undici';
import { EmbeddedCluster } from '../../src/cluster/embedded-cluster';
import { json, uploadBytes, waitForJobState, WORDCOUNT_CLASS, WORDCOUNT_JAR } from '../../test/helpers/flink';
import { buildJar } from '../../test/helpers/jars';
import { writePaddedJar } from '../../test/helpers/padded-jar';
import { type GatewayProcess, startChild, startGatewayProcess, stopChild } from './procs';
import { MiB, note } from './report';

/** A manifest-only jar: what the operator uploads when the real jar is named by URI. */
export const PLACEHOLDER = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n' });

export interface BenchJar {
  /** File name inside the origin directory. */
  name: string;
  path: string;
  size: number;
  sha256: string;
}

export interface Origin {
  url: string;
  port: number;
  /** Object bytes the origin has sent so far. */
  bytesSent(): Promise<number>;
}

export interface Flink {
  restUrl: string;
  uploadDir: string;
  /** The JobManager's JVM (CPU time). */
  pid: number;
}

/**
 * What the benchmarks share, started on first use and stopped at the end: a scratch directory,
 * padded WordCount jars, one HTTP origin serving them (its own process), the embedded Flink
 * cluster, and gateway processes in front of it.
 */
export class BenchEnv {
  readonly dir = mkdtempSync(join(tmpdir(), 'flink-jar-gateway-bench-'));
  readonly jarDir: string;
  private readonly jars = new Map<number, Promise<BenchJar>>();
  private originP?: Promise<Origin>;
  private flinkP?: Promise<Flink>;
  private cluster?: EmbeddedCluster;
  private readonly gateways = new Map<string, Promise<GatewayProcess>>();
  private readonly cleanups: (() => Promise<void>)[] = [];

  constructor(
    readonly root: string,
    readonly smoke: boolean,
  ) {
    this.jarDir = join(this.dir, 'jars');
  }

  /** A fresh scratch path (never reused: overwriting a large file is slower than writing a new one). */
  scratch(prefix: string): string {
    return join(this.dir, `${prefix}-${randomBytes(6).toString('hex')}`);
  }

  /** WordCount padded with a STORED random entry of `padBytes` (made once per size). */
  jar(padBytes: number): Promise<BenchJar> {
    let p = this.jars.get(padBytes);
    if (!p) {
      p = (async () => {
        await mkdir(this.jarDir, { recursive: true });
        const name = `wordcount-${Math.round(padBytes / MiB)}MiB.jar`;
        const path = join(this.jarDir, name);
        const started = performance.now();
        const { size, sha256 } = await writePaddedJar(WORDCOUNT_JAR, path, padBytes);
        note(`made ${name} (${size} bytes) in ${Math.round(performance.now() - started)} ms`);
        return { name, path, size, sha256 };
      })();
      this.jars.set(padBytes, p);
    }
    return p;
  }

  /** The HTTP origin serving every jar in jarDir (bench/servers/jar-origin.cjs, its own process). */
  origin(): Promise<Origin> {
    this.originP ??= (async () => {
      await mkdir(this.jarDir, { recursive: true });
      const { child, match } = await startChild(process.execPath, [join(this.root, 'bench', 'servers', 'jar-origin.cjs'), this.jarDir], {
        ready: /JAR_ORIGIN_READY (\S+)/,
        timeoutMs: 15_000,
      });
      this.cleanups.push(() => stopChild(child));
      const url = match[1]!;
      return {
        url,
        port: Number(new URL(url).port),
        bytesSent: async () => Number(await (await request(`${url}/_bytes`)).body.text()),
      };
    })();
    return this.originP;
  }

  /**
   * The embedded Flink 2.1 session cluster (embedded-flink/). JVM options: BENCH_FLINK_JVM_OPTS,
   * default `-Xmx1g -XX:+UseSerialGC` (C2 on, unlike the test default, so the JobManager is not
   * made artificially slow, which would flatter the gateway's ratios).
   */
  flink(): Promise<Flink> {
    this.flinkP ??= (async () => {
      const started = performance.now();
      const cluster = await EmbeddedCluster.start({
        rootDir: this.root,
        jvmOptions: (process.env.BENCH_FLINK_JVM_OPTS ?? '-Xmx1g -XX:+UseSerialGC').split(/\s+/).filter(Boolean),
        slots: 4,
        startupTimeoutMs: 300_000,
        log: pino({ level: 'warn' }, pino.destination(2)),
      });
      this.cluster = cluster;
      note(`embedded Flink ready at ${cluster.restUrl} in ${Math.round(performance.now() - started)} ms`);
      return { restUrl: cluster.restUrl, uploadDir: cluster.uploadDir, pid: cluster.pid! };
    })();
    return this.flinkP;
  }

  /**
   * A gateway process (`node bin/flink-jar-gateway.js`) in front of the embedded cluster, allowed to
   * fetch plain http from the bench origin, sharing web.upload.dir with the JobManager. One per `key`
   * (`extra` options apply to the first call's process).
   */
  gateway(key: string, handoff: 'shared-dir' | 'upload', extra: Record<string, string> = {}): Promise<GatewayProcess> {
    let p = this.gateways.get(key);
    if (!p) {
      p = (async () => {
        const [flink, origin] = await Promise.all([this.flink(), this.origin()]);
        const cacheDir = join(this.dir, `gw-cache-${key}`);
        const gw = await startGatewayProcess(this.root, {
          'gateway.cluster.rest-url': flink.restUrl,
          'web.upload.dir': flink.uploadDir,
          'gateway.artifacts.handoff': handoff,
          'gateway.artifacts.cache-dir': cacheDir,
          'web.submit.jar-uri.enable': 'true',
          'gateway.artifacts.allowed-schemes': 'http',
          'user.artifacts.raw-http-enabled': 'true',
          'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
          'user.artifacts.max-size': '2 gb',
          'gateway.upload.max-size': '2 gb',
          // BENCH_GATEWAY_OPTS="key=value;key=value": extra options for every gateway process
          // (e.g. gateway.artifacts.parallel-fetch.concurrency=1 to compare with one stream).
          ...Object.fromEntries(
            (process.env.BENCH_GATEWAY_OPTS ?? '')
              .split(';')
              .filter(Boolean)
              .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
          ),
          ...extra,
        });
        this.cleanups.push(async () => {
          await gw.stop();
          rmSync(cacheDir, { recursive: true, force: true });
        });
        note(`gateway '${key}' (handoff ${handoff}) at ${gw.url}, pid ${gw.pid}`);
        return gw;
      })();
      this.gateways.set(key, p);
    }
    return p;
  }

  async close(): Promise<void> {
    for (const c of this.cleanups.reverse()) await c().catch((err: unknown) => note(`cleanup: ${(err as Error).message}`));
    await this.cluster?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Uploads the placeholder jar to `baseUrl`; returns its jar id. */
export async function uploadPlaceholder(baseUrl: string): Promise<string> {
  const up = await uploadBytes(baseUrl, [{ name: 'placeholder.jar', bytes: PLACEHOLDER }]);
  if (up.status !== 200) throw new Error(`placeholder upload to ${baseUrl} answered ${up.status}: ${JSON.stringify(up.body)}`);
  return jarIdOf(up.body);
}

export function jarIdOf(body: unknown): string {
  const filename = String((body as { filename?: unknown }).filename ?? '');
  const id = filename.substring(filename.lastIndexOf('/') + 1);
  if (!id) throw new Error(`no filename in ${JSON.stringify(body)}`);
  return id;
}

/** POST <base>/v1/jars/<jarId>/run for WordCount; returns the job id, or throws with Flink's answer. */
export async function runJar(
  baseUrl: string,
  jarId: string,
  jobId: string,
  flinkConfiguration: Record<string, string> = {},
): Promise<string> {
  const r = await json('POST', `${baseUrl}/v1/jars/${jarId}/run`, {
    entryClass: WORDCOUNT_CLASS,
    programArgsList: [],
    jobId,
    flinkConfiguration: { 'parallelism.default': '1', ...flinkConfiguration },
  });
  if (r.status !== 200 || r.body.jobid !== jobId)
    throw new Error(`run on ${baseUrl} answered ${r.status}: ${JSON.stringify(r.body).slice(0, 500)}`);
  return jobId;
}

export async function deleteJar(baseUrl: string, jarId: string): Promise<void> {
  const r = await json('DELETE', `${baseUrl}/v1/jars/${jarId}`);
  if (r.status !== 200) throw new Error(`DELETE jar ${jarId} on ${baseUrl} answered ${r.status}`);
}

/** Waits (outside any timing) until the job is done, so that runs do not pile up on 2 cores. */
export async function settle(flink: Flink, jobId: string): Promise<void> {
  const state = await waitForJobState(flink.restUrl, jobId, ['FINISHED', 'FAILED', 'CANCELED'], 180_000);
  if (state !== 'FINISHED') throw new Error(`job ${jobId} ended ${state}`);
}
