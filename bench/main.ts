import { copyFileSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../src/project-root';
import { tuneV8 } from '../src/v8-tuning';
import { BenchEnv } from './lib/env';
import { killAllTracked } from './lib/procs';
import { emit, note, type RunPlan } from './lib/report';
import { engineDecision } from './measures/engine';
import { fetchThroughput } from './measures/fetch';
import { linkThroughput } from './measures/link';
import { rssGrowth } from './measures/memory';
import { passThrough } from './measures/passthrough';
import { resubmit, submitLatency } from './measures/submit';
import { uploadThroughput } from './measures/upload';

const USAGE = `Usage: npm run bench [-- --smoke] [-- --only=fetch,engine,link,submit,resubmit,passthrough,upload,memory] [-- --reps=N]
       [-- --cases=fetch.http,fetch.s3-native,...]

Runs the side-by-side benchmarks and prints one JSON object per measure on stdout
(progress on stderr). --smoke runs each once on small inputs and judges no target.`;

const MEASURES: Record<string, (env: BenchEnv, plan: RunPlan) => Promise<void>> = {
  // The download-engine decision runs with the fetch measure (same run, same machine state).
  fetch: async (env, plan) => {
    await fetchThroughput(env, plan);
    await engineDecision(env, plan);
  },
  engine: engineDecision,
  link: linkThroughput,
  submit: submitLatency,
  resubmit,
  passthrough: passThrough,
  upload: uploadThroughput,
  memory: rssGrowth,
};

/** test/servers/*.cjs are found next to the compiled helpers through __dirname: copy them there. */
function copyServerScripts(root: string): void {
  const from = join(root, 'test', 'servers');
  const to = join(__dirname, '..', 'test', 'servers');
  mkdirSync(to, { recursive: true });
  for (const f of readdirSync(from)) if (f.endsWith('.cjs')) copyFileSync(join(from, f), join(to, f));
}

async function main(argv: string[]): Promise<number> {
  // The fetch and link measures run the gateway's fetcher in this process: with the V8 settings
  // the gateway process gives itself (ADR 0018).
  if (process.env.BENCH_V8_TUNING !== 'off') tuneV8();
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const smoke = argv.includes('--smoke');
  const only = argv
    .find((a) => a.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',')
    .filter(Boolean);
  for (const name of only ?? []) {
    if (!MEASURES[name]) {
      process.stderr.write(`unknown measure '${name}'\n${USAGE}\n`);
      return 2;
    }
  }
  const root = projectRoot(__dirname);
  if (!existsSync(join(root, 'dist', 'src', 'main.js'))) {
    process.stderr.write('dist/ is missing: run through `npm run bench` (it builds first)\n');
    return 2;
  }
  copyServerScripts(root);
  const reps = Number(argv.find((a) => a.startsWith('--reps='))?.slice('--reps='.length) ?? 5);
  const cases = argv
    .find((a) => a.startsWith('--cases='))
    ?.slice('--cases='.length)
    .split(',')
    .filter(Boolean);
  const plan: RunPlan = {
    ...(smoke ? { smoke, warmups: 0, reps: 1 } : { smoke, warmups: 1, reps: Math.max(1, reps) }),
    ...(cases ? { cases } : {}),
  };
  note(
    `${smoke ? 'smoke' : 'full'} run on ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${Math.round(totalmem() / 1024 ** 3)} GiB RAM, Node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  const env = new BenchEnv(root, smoke);
  let failed = 0;
  const stop = (signal: string) => {
    note(`${signal}: stopping`);
    void env.close().finally(() => {
      killAllTracked();
      process.exit(130);
    });
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('exit', killAllTracked);
  try {
    for (const [name, run] of Object.entries(MEASURES)) {
      if (only && !only.includes(name)) continue;
      // The fetch measure runs the engine decision itself: alone only when asked for without fetch.
      if (name === 'engine' && (only === undefined || only.includes('fetch'))) continue;
      const started = performance.now();
      note(`measure '${name}' starting`);
      try {
        await run(env, plan);
      } catch (err) {
        failed++;
        note(`measure '${name}' FAILED: ${(err as Error).stack ?? String(err)}`);
        emit({
          name: `${name}.error`,
          unit: 'n/a',
          gateway: null,
          anchor: null,
          ratio: null,
          ratioIs: 'n/a',
          target: null,
          met: null,
          smoke,
          params: { error: (err as Error).message },
        });
      }
      note(`measure '${name}' took ${Math.round((performance.now() - started) / 1000)} s`);
    }
  } finally {
    await env.close();
  }
  return failed > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    killAllTracked();
    process.exit(1);
  },
);
