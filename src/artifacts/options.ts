import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Configuration } from '../config/registry';
import { option, type OptionDef } from '../config/types';

const section = 'Remote jars';

/** Options of the artifacts feature (fetching, cache, policy). Plugin options live in fs-plugins/. */
export const artifactOptions = {
  fetchTimeout: option({
    key: 'user.artifacts.fetch-timeout',
    type: 'duration',
    default: 120_000,
    min: 1,
    section,
    description:
      "Longest time one jar fetch may take (request and transfer). Stays below the Flink client's 5 min idleness timeout, so a slow store fails the run with a clear error instead of a dropped connection.",
  }),
  maxSize: option({
    key: 'user.artifacts.max-size',
    type: 'memory',
    default: 512 * 1024 ** 2,
    min: 1,
    section,
    description: 'Largest jar the gateway fetches: the declared size is checked first, then the bytes while streaming.',
  }),
  maxConcurrentFetches: option({
    key: 'user.artifacts.max-concurrent-fetches',
    type: 'int',
    default: 4,
    min: 1,
    section,
    description: 'Fetches running at once; further fetches wait in a queue.',
  }),
  fetchQueueSize: option({
    key: 'gateway.artifacts.fetch-queue-size',
    type: 'int',
    default: 32,
    min: 0,
    section,
    description: 'Fetches allowed to wait for a slot; beyond that a request gets 503 with Retry-After.',
  }),
  fetchRetries: option({
    key: 'gateway.artifacts.fetch-retries',
    type: 'int',
    default: 2,
    min: 0,
    max: 10,
    section,
    description:
      'Retries of a fetch after a transient store failure (unreachable, 5xx, reset), with exponential backoff from 500 ms; never after not-found, denied or too-large.',
  }),
  // Defaults chosen on the bench's simulated link (ADR 0035): on a link that caps each connection,
  // throughput grows with the number of requests up to 8, while on loopback the CPU per GiB does
  // not depend on it; with the short last round (planParts) the part size hardly matters, so 16 MiB
  // keeps the number of requests, each of which costs a round trip, low.
  parallelFetchPartSize: option({
    key: 'gateway.artifacts.parallel-fetch.part-size',
    type: 'memory',
    default: 16 * 1024 ** 2,
    min: 64 * 1024,
    section,
    description:
      'Most bytes per ranged request when a large object is read with several requests at once (S3, Azure Blob, and HTTP(S) origins that send Accept-Ranges: bytes and a strong ETag); the object is cut into a multiple of gateway.artifacts.parallel-fetch.concurrency parts of at most this size, so the last round of requests is full; an object of at least half a round ends with a round of parts a quarter this size, so little is left to hash after the last byte. Objects smaller than two parts are read in one stream.',
  }),
  parallelFetchConcurrency: option({
    key: 'gateway.artifacts.parallel-fetch.concurrency',
    type: 'int',
    default: 8,
    min: 1,
    max: 64,
    section,
    description:
      'Ranged requests streaming at once for one large object (a request about to end asks for the next part one request latency ahead when that latency is at least 5 ms, so that for a moment up to twice this many may be open), each pinned to the version or ETag the first request saw (an object replaced mid-read fails with GW_FETCH_CHANGED); 1 reads every object in one stream. Each request holds up to 256 KiB of write buffer plus its socket buffers; measured RSS growth moving 1 GiB: about 10-15 MiB more with 8 requests than with one (bench/RESULTS.md).',
  }),
  // Between what a store next to the gateway serves on one connection (faster, and cheaper per
  // byte, in one stream) and what a real store serves on one (tens of MB/s); ADR 0035.
  parallelFetchLoneStreamRate: option({
    key: 'gateway.artifacts.parallel-fetch.lone-stream-rate',
    type: 'memory',
    default: 256 * 1024 ** 2,
    min: 0,
    section,
    description:
      'Bytes per second (e.g. "256 mb") the first ranged request of a large object must deliver, read alone for 10 ms after its response headers, for the object to be read in one stream. A store next to the gateway serves one stream faster than the gateway hashes it, and then one stream costs less CPU per byte than several (no bytes read back from the file for the in-order digest); a store that caps each connection (a real network) gets the other requests at once, after the first one\'s latency plus 10 ms. 0 starts every ranged request at once.',
  }),
  progressInterval: option({
    key: 'gateway.artifacts.progress-interval',
    type: 'duration',
    default: 5000,
    min: 100,
    section,
    description: 'How often a running fetch logs its progress (bytes, total, rate).',
  }),
  // Bounds on a jar's zip structure, checked on uploads and fetched jars before either reaches the
  // JobManager (zip-bounds.ts). They stop hostile jars (a declared count of 4 billion entries, a
  // central directory Java would read into one byte[] on the JobManager heap, a manifest bomb),
  // and sit well above real fat jars: the largest (Spark/Flink assemblies with Hadoop and the AWS
  // SDK bundle) have 100k–250k entries, a central directory of 10–35 MB, a manifest of a few KiB.
  maxZipEntries: option({
    key: 'gateway.artifacts.max-zip-entries',
    deprecatedKeys: ['user.artifacts.max-zip-entries'],
    type: 'int',
    default: 500_000,
    min: 1,
    section,
    description:
      "Most entries a jar's central directory may declare (zip64 counts included), for uploads and fetched jars. About twice the largest real fat jars; a jar over it is refused with 400 before it reaches the JobManager.",
  }),
  maxCentralDirectorySize: option({
    key: 'gateway.artifacts.max-central-directory-size',
    deprecatedKeys: ['user.artifacts.max-central-directory-size'],
    type: 'memory',
    default: 64 * 1024 ** 2,
    min: 1,
    section,
    description:
      'Largest zip central directory a jar may declare, for uploads and fetched jars. The JobManager reads it whole into its heap when it opens the jar; 64 mb holds about 450k entries with long class names.',
  }),
  maxManifestSize: option({
    key: 'gateway.artifacts.max-manifest-size',
    deprecatedKeys: ['user.artifacts.max-manifest-size'],
    type: 'memory',
    default: 1024 ** 2,
    min: 1,
    section,
    description:
      "Largest META-INF/MANIFEST.MF a jar's central directory may declare (uncompressed size; nothing is inflated to measure it), for uploads and fetched jars. The JobManager reads the manifest whole; real manifests are a few KiB, those of signed jars (a digest per entry) up to a few hundred KiB.",
  }),
  disallowRestrictedHosts: option({
    key: 'gateway.artifacts.disallow-restricted-hosts',
    deprecatedKeys: ['user.artifacts.disallow-restricted-hosts'],
    type: 'boolean',
    default: true,
    section,
    description:
      'Refuse to connect to loopback, link-local, private, unique-local, multicast and unspecified addresses (checked on the resolved address at connect time and after every redirect, for every plugin).',
  }),
  restrictedHostsAllowed: option({
    key: 'gateway.artifacts.restricted-hosts.allowed',
    deprecatedKeys: ['user.artifacts.restricted-hosts.allowed'],
    type: 'list',
    default: [],
    section,
    description:
      'host:port entries exempt from gateway.artifacts.disallow-restricted-hosts, separated by ";" (a private MinIO, an internal Artifactory). List the storage endpoints you configure here.',
  }),
  allowedUris: option({
    key: 'gateway.artifacts.allowed-uris',
    deprecatedKeys: ['user.artifacts.allowed-uris'],
    type: 'list',
    default: [],
    section,
    description:
      'Jar URIs this cluster may fetch, as prefixes or patterns separated by ";" (empty: any URI that passes the scheme and address checks). A prefix matches on a path-segment boundary: s3://team-a-jars/releases allows s3://team-a-jars/releases/app.jar, not s3://team-a-jars/releases-old/app.jar. "*" matches within one path segment (or a host label run: https://*.example.com/), "**" across segments. Scheme and host compare lower-cased after URL normalisation; the query string is ignored. Checked for the submitted URI and every HTTP redirect target.',
  }),
  allowedSchemes: option({
    key: 'gateway.artifacts.allowed-schemes',
    deprecatedKeys: ['user.artifacts.allowed-schemes'],
    type: 'list',
    default: ['https'],
    section,
    description:
      'URI schemes a run or POST /jars/fetch may name, separated by ";". By default https alone, as the Flink Kubernetes Operator allows for a FlinkSessionJob\'s jarURI (kubernetes.operator.user.artifacts.allowed-schemes): list each store the cluster\'s credentials may read for a caller, e.g. "https;s3;wasbs;abfss;gs" (the S3 plugin also serves s3a and s3p). Plain http, wasb, abfs and file are for development (http also needs user.artifacts.raw-http-enabled, file gateway.artifacts.local-file.enabled).',
  }),
  caBundle: option({
    key: 'gateway.artifacts.ca-bundle',
    deprecatedKeys: ['user.artifacts.ca-bundle'],
    type: 'string',
    section,
    description:
      'Path of a PEM file with extra CA certificates trusted by the HTTP, S3 and Azure plugins (private endpoints). System CAs stay trusted.',
  }),
  cacheDir: option({
    key: 'gateway.artifacts.cache-dir',
    type: 'string',
    default: join(tmpdir(), 'flink-jar-gateway-cache'),
    section,
    description:
      'Content-addressed jar cache (blobs named by SHA-256 plus an index by URI). Leftover temporary files are removed at start. Put it on the volume shared with the JobManager for zero-copy hand-off.',
  }),
  cacheMaxSize: option({
    key: 'gateway.artifacts.cache.max-size',
    type: 'memory',
    default: 10 * 1024 ** 3,
    min: 0,
    section,
    description: 'Size bound of the jar cache; least recently used jars are evicted, never one in use.',
  }),
  handoff: option({
    key: 'gateway.artifacts.handoff',
    type: 'enum',
    default: 'auto',
    values: ['auto', 'upload', 'shared-dir'],
    section,
    description:
      'How a jar reaches the JobManager, fetched by URI or uploaded to the gateway: "upload" (multipart to /v1/jars/upload, works anywhere; an upload streams on as it arrives), "shared-dir" (hard link into <web.upload.dir>/flink-web-upload once every check passed, no second copy; needs web.upload.dir shared with the JobManager and gateway.artifacts.cache-dir on the same volume, else each jar is copied), "auto" (shared-dir when web.upload.dir is known, else upload).',
  }),
  // Flink's own artifact keys: accepted so that one config file serves Flink and the gateway.
  baseDir: option({
    key: 'user.artifacts.base-dir',
    type: 'string',
    section,
    description:
      "Flink's application-mode artifact directory. Not used by the gateway (see gateway.artifacts.cache-dir); accepted so a shared Flink config file loads.",
  }),
  artifactList: option({
    key: 'user.artifacts.artifact-list',
    type: 'list',
    section,
    description: "Flink's extra application-mode artifacts. Not used by the gateway yet; accepted so a shared Flink config file loads.",
  }),
} satisfies Record<string, OptionDef>;

/**
 * Bounds on a jar's zip structure (gateway.artifacts.max-zip-entries, -max-central-directory-size,
 * -max-manifest-size), checked on uploads (JarInspector, while streaming) and on fetched jars
 * (zipProblem, on the file) before a jar reaches the JobManager. Every check reads only what the
 * end records and central-directory headers declare, so a hostile jar costs a bounded read.
 */
export interface ZipLimits {
  maxEntries: number;
  maxCentralDirectorySize: number;
  maxManifestSize: number;
}

/** One set of zip-structure bounds for uploads and fetched jars alike. */
export function zipLimitsOf(config: Configuration): ZipLimits {
  return {
    maxEntries: config.get(artifactOptions.maxZipEntries),
    maxCentralDirectorySize: config.get(artifactOptions.maxCentralDirectorySize),
    maxManifestSize: config.get(artifactOptions.maxManifestSize),
  };
}

/** The fetcher's limits and policy, as configured. */
export function fetchSettings(config: Configuration) {
  return {
    allowedSchemes: config.get(artifactOptions.allowedSchemes),
    maxBytes: config.get(artifactOptions.maxSize),
    zipLimits: zipLimitsOf(config),
    timeoutMs: config.get(artifactOptions.fetchTimeout),
    retries: config.get(artifactOptions.fetchRetries),
    parallel: {
      partSize: config.get(artifactOptions.parallelFetchPartSize),
      concurrency: config.get(artifactOptions.parallelFetchConcurrency),
      loneStreamRate: config.get(artifactOptions.parallelFetchLoneStreamRate),
    },
    progressIntervalMs: config.get(artifactOptions.progressInterval),
  };
}

/** `gateway.artifacts.handoff`, with `auto` decided: shared-dir when the JobManager's upload dir is known. */
export function handoffModeOf(config: Configuration, uploadDir: string | undefined): 'upload' | 'shared-dir' {
  const setting = config.get(artifactOptions.handoff);
  return setting === 'auto' ? (uploadDir ? 'shared-dir' : 'upload') : setting;
}

/** The PEM text of `gateway.artifacts.ca-bundle` (the plugins' and token providers' extra CAs), if set. */
export function caBundleOf(config: Configuration): string | undefined {
  const path = config.getOptional(artifactOptions.caBundle);
  return path ? readFileSync(path, 'utf8') : undefined;
}
