import { randomBytes } from 'node:crypto';
import { closeSync, createWriteStream, openSync, readSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { azurePlugin } from '../../fs-plugins/azure';
import { gcsPlugin } from '../../fs-plugins/gcs';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { makeSas, startAzurite, uploadBlob } from '../../test/servers/azurite';
import { startFakeGcs } from '../../test/servers/fake-gcs';
import { fixtureClient, putObject, startS3Server } from '../../test/servers/s3-server';
import type { BenchEnv } from '../lib/env';
import { BenchFetcher } from '../lib/fetcher';
import { childrenCpuSeconds, curl, ownCpuSeconds, runCommand, startChild, stopChild, track } from '../lib/procs';
import { emit, judged, MiB, note, type RunPlan, round, selected, sideBySide, summarize } from '../lib/report';

const S3_KEY = { accessKeyId: 'AKIDBENCH', secretAccessKey: `bench-${randomBytes(12).toString('hex')}` };
const AZ = { name: 'benchacct', key: randomBytes(64).toString('base64') };

const GiB = 1024 * MiB;

function parallelOverride(): Record<string, string> {
  const v = process.env.BENCH_FETCH_PARALLEL;
  if (!v) return {};
  const [concurrency, partSize] = v.split(':');
  return {
    'gateway.artifacts.parallel-fetch.concurrency': concurrency!,
    ...(partSize ? { 'gateway.artifacts.parallel-fetch.part-size': partSize } : {}),
  };
}

/** One side of one round: throughput and the CPU it cost, per GiB moved. */
/** "N parts, M at once" from a fetcher result that says how it read the object. */
function readOf(r: object): string | undefined {
  const read = 'read' in r ? (r.read as { parts: number; atOnce: number } | undefined) : undefined;
  return read ? `${read.parts} parts, ${read.atOnce} at once` : undefined;
}

interface Sample {
  mibps: number;
  cpuPerGiB: number;
  /** How the gateway read the object, from its log line (the fetcher path only). */
  read?: string | undefined;
}

/**
 * curl -o <new file>: throughput from curl's own time_total (its process start-up is not counted),
 * CPU from the children's counters. Then `openssl dgst -sha256` of that file, so that curl's CPU plus
 * the digest's is the CPU a native client spends on the gateway's work (write the file, SHA-256 it).
 */
async function curlDownload(
  env: BenchEnv,
  url: string,
  expected: { size: number; sha256: string },
  withMd5: boolean,
): Promise<{ curl: Sample; withDigest: Sample; withMd5?: Sample }> {
  const file = env.scratch('curl-out');
  try {
    const c0 = childrenCpuSeconds();
    const r = await curl(['-f', '-o', file, '-w', '%{time_total} %{size_download}', url]);
    const c1 = childrenCpuSeconds();
    const [secs, bytes] = r.stdout.trim().split(' ').map(Number);
    if (bytes !== expected.size) throw new Error(`curl got ${bytes} bytes, expected ${expected.size}`);
    const dgst = await runCommand('openssl', ['dgst', '-sha256', '-r', file], 60_000);
    const c2 = childrenCpuSeconds();
    if (dgst.status !== 0 || !dgst.stdout.startsWith(expected.sha256))
      throw new Error(`openssl dgst: ${dgst.stderr.trim() || dgst.stdout.trim()}`);
    const gib = expected.size / GiB;
    // The store checksum too (what the S3 and Azure plugins verify): MD5 of the same file.
    const md5 = withMd5 ? await runCommand('openssl', ['dgst', '-md5', '-r', file], 60_000) : undefined;
    const c3 = childrenCpuSeconds();
    if (md5 !== undefined && md5.status !== 0) throw new Error(`openssl dgst -md5: ${md5.stderr.trim()}`);
    return {
      curl: { mibps: expected.size / MiB / secs!, cpuPerGiB: (c1 - c0) / gib },
      withDigest: { mibps: expected.size / MiB / (secs! + dgst.ms / 1000), cpuPerGiB: (c2 - c0) / gib },
      ...(md5 !== undefined
        ? { withMd5: { mibps: expected.size / MiB / (secs! + (dgst.ms + md5.ms) / 1000), cpuPerGiB: (c3 - c0) / gib } }
        : {}),
    };
  } finally {
    rmSync(file, { force: true });
  }
}

/**
 * The same work as the gateway in one native pipeline: `curl | tee <new file> | openssl dgst -sha256`
 * (coreutils' sha256sum has no SHA-NI code and costs several times OpenSSL's CPU, so OpenSSL is the fair anchor).
 * Wall time of the whole pipeline (process start-up included); CPU of curl, tee, openssl and bash.
 */
async function curlTeeDigest(env: BenchEnv, url: string, expected: { size: number; sha256: string }): Promise<Sample> {
  const file = env.scratch('curl-tee-out');
  try {
    const c0 = childrenCpuSeconds();
    const r = await runCommand(
      'bash',
      ['-c', 'set -o pipefail; curl -sSf "$1" | tee "$2" | openssl dgst -sha256 -r', 'curl-tee-digest', url, file],
      120_000,
    );
    const cpu = childrenCpuSeconds() - c0;
    if (r.status !== 0 || !r.stdout.startsWith(expected.sha256))
      throw new Error(`curl | tee | openssl dgst failed (${r.status}): ${r.stderr.trim()}`);
    return { mibps: expected.size / MiB / (r.ms / 1000), cpuPerGiB: cpu / (expected.size / GiB) };
  } finally {
    rmSync(file, { force: true });
  }
}

/** The socket-to-file ceiling: a node client piping a separate-process TCP sender into a new file. */
async function socketToFile(env: BenchEnv, port: number, size: number): Promise<Sample> {
  const file = env.scratch('ceiling-out');
  try {
    const cpu0 = ownCpuSeconds();
    const started = performance.now();
    const sock = connect(port, '127.0.0.1');
    const out = createWriteStream(file, { flags: 'wx' });
    await pipeline(sock, out);
    const ms = performance.now() - started;
    if (out.bytesWritten !== size) throw new Error(`ceiling: wrote ${out.bytesWritten} of ${size}`);
    return { mibps: size / MiB / (ms / 1000), cpuPerGiB: (ownCpuSeconds() - cpu0) / (size / GiB) };
  } finally {
    rmSync(file, { force: true });
  }
}

/**
 * The store's own socket-to-file ceiling (ADR 0035): the ceiling's client above, pointed at the
 * case's own store. It writes one `GET` of the case's URL (`Connection: close`) on a node `net`
 * socket and pipes everything the store sends, head and body, into a new file: no HTTP parsing, no
 * digest, no checks. The store's cost is in it, the client's is as small as Node makes it.
 */
async function storeToFile(env: BenchEnv, url: string, size: number): Promise<Sample> {
  const file = env.scratch('store-ceiling-out');
  const u = new URL(url);
  try {
    const cpu0 = ownCpuSeconds();
    const started = performance.now();
    const sock = connect(Number(u.port), u.hostname);
    sock.write(`GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: close\r\n\r\n`);
    const out = createWriteStream(file, { flags: 'wx' });
    await pipeline(sock, out);
    const ms = performance.now() - started;
    const head = Buffer.alloc(16);
    const fd = openSync(file, 'r');
    try {
      readSync(fd, head, 0, 16, 0);
    } finally {
      closeSync(fd);
    }
    if (!/^HTTP\/1\.1 200 /.test(head.toString('latin1')))
      throw new Error(`store ceiling: the store answered ${JSON.stringify(head.toString('latin1'))}`);
    if (out.bytesWritten < size) throw new Error(`store ceiling: wrote ${out.bytesWritten} bytes, fewer than the object's ${size}`);
    return { mibps: size / MiB / (ms / 1000), cpuPerGiB: (ownCpuSeconds() - cpu0) / (size / GiB) };
  } finally {
    rmSync(file, { force: true });
  }
}

/**
 * Measure 1: fetch throughput of one object, the gateway's fetch path (in this process) vs curl on
 * the same object, for HTTP, an S3 presigned URL and an Azure SAS URL (through the HTTP plugin, as
 * the gateway fetches such URLs), plus the S3 and Azure plugins with credentials, plus the
 * socket-to-file ceiling.
 */
export async function fetchThroughput(env: BenchEnv, plan: RunPlan): Promise<void> {
  const jar = await env.jar(plan.smoke ? 8 * MiB : 200 * MiB);
  const size = jar.size;

  // The ceiling first, on an otherwise idle machine; its sender stays up, so that each case measures
  // the ceiling again in its own rounds (see below).
  const src = await startChild(process.execPath, [join(env.root, 'bench', 'servers', 'tcp-source.cjs'), String(size)], {
    ready: /TCP_SOURCE_READY (\d+)/,
    timeoutMs: 15_000,
  });
  track(src.child);
  const ceilingPort = Number(src.match[1]);
  const ceiling: Sample[] = [];
  for (let r = 0; r < plan.warmups + plan.reps; r++) {
    const v = await socketToFile(env, ceilingPort, size);
    if (r >= plan.warmups) ceiling.push(v);
  }
  const ceilingSummary = summarize(ceiling.map((c) => c.mibps));
  emit({
    name: 'fetch.ceiling',
    unit: 'MiB/s',
    gateway: null,
    anchor: ceilingSummary,
    ratio: null,
    ratioIs:
      "n/a (the anchor is the bare socket-to-file ceiling: node net client ← separate-process TCP sender, piped to a new file; measured here at the start, and again in every round of each case as information; each case's ceilingMet uses the socket-to-file ceiling from its own store, ADR 0035)",
    target: null,
    met: null,
    smoke: plan.smoke,
    params: { bytes: size, cpuSecPerGiB: summarize(ceiling.map((c) => c.cpuPerGiB)), reps: plan.reps, warmups: plan.warmups },
  });

  const origin = await env.origin();
  const [s3, azurite, gcs] = await Promise.all([
    startS3Server({ keys: { [S3_KEY.accessKeyId]: S3_KEY.secretAccessKey }, buckets: ['bench'] }),
    startAzurite({ accounts: [AZ] }),
    // fake-gcs-server (scripts/build-fake-gcs.sh), read without credentials over its plain http root.
    startFakeGcs(),
  ]);
  track(s3.child);
  track(azurite.child);
  track(gcs.child);
  const fetcher = new BenchFetcher(env.dir, [httpPlugin, s3Plugin, azurePlugin, gcsPlugin], {
    'gateway.artifacts.allowed-schemes': 'http;https;s3;wasbs;gs',
    'user.artifacts.raw-http-enabled': 'true',
    'gateway.artifacts.restricted-hosts.allowed': [origin.port, s3.port, azurite.port, gcs.port].map((p) => `127.0.0.1:${p}`).join(';'),
    'user.artifacts.max-size': '2 gb',
    // BENCH_FETCH_PARALLEL=<concurrency>[:<part size>] overrides the registry's defaults (1 = one stream).
    ...parallelOverride(),
    's3.endpoint': s3.url,
    's3.path.style.access': 'true',
    's3.access-key': S3_KEY.accessKeyId,
    's3.secret-key': S3_KEY.secretAccessKey,
    [`fs.azure.account.key.${AZ.name}.blob.core.windows.net`]: AZ.key,
    [`fs.azure.account.endpoint.${AZ.name}`]: azurite.blobUrl(AZ.name),
    'fs.gs.storage.root.url': gcs.url,
    'fs.gs.auth.type': 'UNAUTHENTICATED',
  });
  try {
    const started = performance.now();
    await gcs.createBucket('bench');
    await Promise.all([
      putObject(s3.url, S3_KEY, 'bench', jar.name, jar.path),
      uploadBlob(azurite, AZ, 'jars', jar.name, jar.path),
      gcs.upload('bench', jar.name, jar.path),
    ]);
    note(`uploaded the object to the S3 server, Azurite and fake-gcs-server in ${Math.round(performance.now() - started)} ms`);
    const s3client = fixtureClient(s3.url, S3_KEY);
    const presigned = await getSignedUrl(s3client, new GetObjectCommand({ Bucket: 'bench', Key: jar.name }), { expiresIn: 3600 });
    s3client.destroy();
    // The same object's media through the JSON API, as the gs:// plugin reads it (no credential on the emulator).
    const gcsMedia = `${gcs.url}/storage/v1/b/bench/o/${encodeURIComponent(jar.name)}?alt=media`;
    const sas = `${azurite.blobUrl(AZ.name)}/jars/${jar.name}?${makeSas(AZ, { container: 'jars', blobName: jar.name, expiresOn: new Date(Date.now() + 3600_000) })}`;

    const cases = [
      {
        name: 'fetch.http',
        uri: `${origin.url}/${jar.name}`,
        curlUrl: `${origin.url}/${jar.name}`,
        min: 0.9,
        store: 'HTTP origin (bench/servers/jar-origin.cjs)',
        plugin: 'http',
      },
      {
        name: 'fetch.s3-presigned',
        uri: presigned,
        curlUrl: presigned,
        min: 0.8,
        store: '@20minutes/s3rver with SigV4 checks (test/servers/s3-server.ts)',
        plugin: 'http (presigned URL)',
      },
      {
        name: 'fetch.azure-sas',
        uri: sas,
        curlUrl: sas,
        min: 0.8,
        store: 'Azurite blob (test/servers/azurite.ts)',
        plugin: 'http (SAS URL)',
      },
      {
        name: 'fetch.s3-native',
        md5: true,
        uri: `s3://bench/${jar.name}`,
        curlUrl: presigned,
        min: 0.8,
        store: '@20minutes/s3rver',
        plugin: 's3 (access key; anchor: curl on a presigned URL)',
      },
      {
        name: 'fetch.azure-native',
        md5: true,
        uri: `wasbs://jars@${AZ.name}.blob.core.windows.net/${jar.name}`,
        curlUrl: sas,
        min: 0.8,
        store: 'Azurite blob',
        plugin: 'azure (shared key; anchor: curl on a SAS URL)',
      },
      {
        name: 'fetch.gcs',
        md5: true,
        uri: `gs://bench/${jar.name}`,
        curlUrl: gcsMedia,
        min: 0.8,
        store: 'fake-gcs-server (test/servers/fake-gcs.ts)',
        plugin: 'gcs (UNAUTHENTICATED on the emulator; anchor: curl on the JSON API media URL)',
      },
      // Pinned to the jar's SHA-256 (gateway.artifacts.job-jar.sha256): the pin vouches for the bytes, so the store's MD5 is not computed.
      {
        name: 'fetch.s3-native.pinned',
        pin: true,
        uri: `s3://bench/${jar.name}`,
        curlUrl: presigned,
        min: 0.8,
        store: '@20minutes/s3rver',
        plugin: 's3, pinned SHA-256 (anchor: curl on a presigned URL)',
      },
      {
        name: 'fetch.azure-native.pinned',
        pin: true,
        uri: `wasbs://jars@${AZ.name}.blob.core.windows.net/${jar.name}`,
        curlUrl: sas,
        min: 0.8,
        store: 'Azurite blob',
        plugin: 'azure, pinned SHA-256 (anchor: curl on a SAS URL)',
      },
    ] as { name: string; uri: string; curlUrl: string; min: number; store: string; plugin: string; md5?: boolean; pin?: boolean }[];
    for (const c of cases.filter((x) => selected(plan, x.name))) {
      // The whole fetcher when it can fetch this URI; otherwise (say a HEAD it cannot do) the
      // download step alone, and the reason is reported.
      let gatewayPath = 'ArtifactFetcher.fetch (stat, open, sha256, temp file, zip check, rename)';
      const pin = c.pin ? jar.sha256 : undefined;
      let fetcherError: string | undefined;
      try {
        await fetcher.fetchOnce(c.uri, pin);
      } catch (err) {
        fetcherError = `${(err as { code?: string }).code ?? ''} ${(err as Error).message}`.trim();
        gatewayPath = 'downloadTo only (plugin open, sha256, new file): the full fetcher failed, see fetcherError';
        note(`${c.name}: the fetcher failed (${fetcherError}); timing the download step alone`);
      }
      const expected = { size, sha256: jar.sha256 };
      const gatewayOnce = async (): Promise<Sample> => {
        const cpu0 = ownCpuSeconds();
        const r = fetcherError === undefined ? await fetcher.fetchOnce(c.uri, pin) : await fetcher.downloadOnce(c.uri);
        const cpu = ownCpuSeconds() - cpu0;
        if (r.sha256 !== jar.sha256) throw new Error(`${c.name}: wrong sha256`);
        return { mibps: size / MiB / (r.ms / 1000), cpuPerGiB: cpu / (size / GiB), read: readOf(r) };
      };
      // The anchor side of a round: curl -o (+ openssl dgst of its file), then curl | tee | openssl
      // dgst, then the socket-to-file ceiling again: the machine's state drifts over a run (a
      // ceiling measured once, first, differed widely between full runs), so each case is held to
      // the ceiling of its own rounds.
      const anchorOnce = async () => ({
        ...(await curlDownload(env, c.curlUrl, expected, c.md5 === true)),
        tee: await curlTeeDigest(env, c.curlUrl, expected),
        ceiling: await socketToFile(env, ceilingPort, size),
        storeCeiling: await storeToFile(env, c.curlUrl, size),
      });
      const { gateway, anchor } = await sideBySide(plan, c.name, gatewayOnce, anchorOnce);
      const g = summarize(gateway.map((x) => x.mibps));
      const a = summarize(anchor.map((x) => x.curl.mibps));
      const ratio = round(g.median / a.median);
      // Judged against the ceiling from the case's own store (ADR 0035); the bare socket's ceiling
      // (a dedicated sender that costs next to nothing) is reported beside it.
      const caseCeiling = summarize(anchor.map((x) => x.storeCeiling.mibps));
      const vsCeiling = round(g.median / caseCeiling.median);
      const socketCeiling = summarize(anchor.map((x) => x.ceiling.mibps));
      const isObjectStore = c.min < 0.9;
      const cpu = {
        gateway: summarize(gateway.map((x) => x.cpuPerGiB)),
        curl: summarize(anchor.map((x) => x.curl.cpuPerGiB)),
        curlPlusOpensslDgst: summarize(anchor.map((x) => x.withDigest.cpuPerGiB)),
        curlTeeOpensslDgst: summarize(anchor.map((x) => x.tee.cpuPerGiB)),
        // The S3 and Azure plugins also check the store's MD5 (single-part ETag, Content-MD5).
        ...(c.md5 ? { curlPlusSha256PlusMd5: summarize(anchor.map((x) => x.withMd5!.cpuPerGiB)) } : {}),
      };
      const cpuRatio = round(cpu.gateway.median / cpu.curlPlusOpensslDgst.median);
      emit({
        name: c.name,
        unit: 'MiB/s',
        gateway: g,
        anchor: a,
        ratio,
        ratioIs: 'gateway/anchor (throughput; higher is better); anchor = curl -o <new file>',
        target: `≥ ${c.min}× curl`,
        met: judged(plan, true, ratio >= c.min),
        smoke: plan.smoke,
        params: {
          bytes: size,
          store: c.store,
          plugin: c.plugin,
          gatewayPath,
          // Whether the lone-stream probe (ADR 0035) kept each read to one stream.
          gatewayReads: gateway.map((x) => x.read ?? 'not reported'),
          ...(fetcherError !== undefined ? { fetcherError } : {}),
          ceilingMiBps: caseCeiling.median,
          ceilingOfThisCase: caseCeiling,
          ceilingIs:
            "node net client: one GET of the same URL on a raw socket to the case's own store, everything it sends piped to a new file (ADR 0035)",
          ceilingCpuSecPerGiB: summarize(anchor.map((x) => x.storeCeiling.cpuPerGiB)),
          socketCeilingOfThisCase: socketCeiling,
          gatewayVsSocketCeiling: round(g.median / socketCeiling.median),
          socketCeilingIs: 'node net client ← dedicated TCP sender (bench/servers/tcp-source.cjs), piped to a new file: information',
          ceilingAtStartMiBps: ceilingSummary.median,
          gatewayVsCeiling: vsCeiling,
          ceilingTarget: "≥ 0.9× the store's socket-to-file ceiling",
          ceilingMet: judged(plan, true, vsCeiling >= 0.9),
          curlVsCeiling: round(a.median / caseCeiling.median),
          curlTeeDigestMiBps: summarize(anchor.map((x) => x.tee.mibps)),
          // CPU-seconds per GiB: the gateway's (this process, every thread) and the anchors' (children).
          cpuSecPerGiB: cpu,
          cpuRatio,
          cpuRatioIs: 'gateway / (curl -o + openssl dgst -sha256 of the file), CPU-s per GiB; lower is better',
          cpuTarget: '≤ 1.5× curl -o + openssl dgst',
          cpuMet: judged(plan, true, cpuRatio <= 1.5),
          ...(cpu.curlPlusSha256PlusMd5
            ? {
                cpuRatioSameWork: round(cpu.gateway.median / cpu.curlPlusSha256PlusMd5.median),
                cpuRatioSameWorkIs:
                  'gateway / (curl -o + openssl dgst -sha256 + openssl dgst -md5): the same work, the store checksum included (information)',
              }
            : {}),
          ...(isObjectStore
            ? { stretch: '≥ 1.0× curl and ≥ 0.85× the ceiling', stretchMet: judged(plan, true, ratio >= 1 && vsCeiling >= 0.85) }
            : {}),
          reps: plan.reps,
          warmups: plan.warmups,
        },
      });
    }
  } finally {
    await fetcher.close();
    await Promise.all([s3.stop(), azurite.stop(), gcs.stop(), stopChild(src.child)]);
  }
}
