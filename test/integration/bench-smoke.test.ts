// @lane jvm: bench:smoke starts the embedded Flink cluster, so it runs in the full suite only (jest.config.js).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';

/**
 * The benchmarks (bench/) in smoke mode: each measure once, on small inputs. This checks
 * only that every measure still runs and prints its JSON object; it asserts no times (a timed test
 * on shared CI cores would be noise). Needs Java for the embedded Flink cluster, like the e2e tests.
 */
const EXPECTED = [
  'fetch.ceiling',
  'fetch.http',
  'fetch.s3-presigned',
  'fetch.azure-sas',
  'fetch.s3-native',
  'fetch.azure-native',
  'fetch.gcs',
  'fetch.s3-native.pinned',
  'fetch.azure-native.pinned',
  'engine.http',
  'engine.s3',
  'engine.azure',
  'engine.decision',
  'fetch.link.http',
  'fetch.link.s3',
  'submit.link.shared-dir.200MB',
  'submit.link.upload.200MB',
  'submit.shared-dir.50MB',
  'submit.upload.50MB',
  'submit.shared-dir.200MB',
  'submit.upload.200MB',
  'resubmit.bytes',
  'resubmit.time',
  'passthrough.overview.p50',
  'passthrough.overview.p99',
  'passthrough.jobs-overview.p50',
  'passthrough.jobs-overview.p99',
  'upload.200MB',
  'upload.200MB.upload-handoff',
  'memory.rss-growth.1GiB',
  'memory.rss-growth.1GiB.shared-dir',
  'memory.rss-growth.1GiB.jar-upload',
  'memory.rss-growth.1GiB.jar-upload.shared-dir',
  'memory.rss-growth.1GiB.job-graph',
];

// A kill bound for a stuck run, not a timing assertion: the smoke run takes 3–4 minutes on a loaded
// machine, the download-engine decision (two engines, three stores) included.
const TIMEOUT_MS = 420_000;
const ROOT = projectRoot(__dirname);

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs one command in its own process group, so that a timeout stops the whole tree it started (and nothing else). */
function run(cmd: string, args: string[], timeoutMs: number): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGTERM');
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * What `npm run bench:smoke` does, minus its `npm run build`: `npm test` has built dist/ already,
 * and rebuilding it here could race with other tests that run the gateway from dist/.
 */
async function runSmoke(): Promise<Result> {
  const tsc = await run(
    process.execPath,
    [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'bench', 'tsconfig.json')],
    120_000,
  );
  if (tsc.code !== 0) return tsc;
  return run(process.execPath, [join(ROOT, '.tmp', 'bench-build', 'bench', 'main.js'), '--smoke'], TIMEOUT_MS);
}

const isSummary = (v: unknown) =>
  v === null || (typeof v === 'object' && ['min', 'median', 'max'].every((k) => typeof (v as Record<string, unknown>)[k] === 'number'));

(process.env.SKIP_EMBEDDED_FLINK === '1' ? describe.skip : describe)('npm run bench:smoke', () => {
  it(
    'runs every benchmark once and prints one valid JSON object per measure',
    async () => {
      const { code, stdout, stderr } = await runSmoke();
      if (code !== 0) throw new Error(`the bench smoke run exited ${code}:\n${stdout.slice(-2000)}\n${stderr.slice(-6000)}`);
      const lines = stdout.split('\n').filter((l) => l.trim().startsWith('{'));
      const measures = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(measures.map((m) => m.name)).toEqual(EXPECTED);
      for (const m of measures) {
        expect(m).toMatchObject({
          unit: expect.any(String),
          ratioIs: expect.any(String),
          smoke: true,
          met: null,
          params: expect.any(Object),
        });
        expect(isSummary(m.gateway)).toBe(true);
        expect(isSummary(m.anchor)).toBe(true);
        expect(m.gateway !== null || m.anchor !== null).toBe(true);
        expect(m.ratio === null || typeof m.ratio === 'number').toBe(true);
      }
    },
    TIMEOUT_MS + 150_000,
  );
});
