// One jest run covers unit, integration (real node:http origins) and e2e (the real embedded Flink
// cluster, started once per run by test/global-setup.ts and shared by the e2e tests).
//
// Two projects split it into lanes, and every suite is in exactly one:
// - `fast` (`npm run test:unit`): every suite that needs no Flink and no JVM. By folder: all of
//   test/unit, test/contract and test/integration (but the gs:// suites, NOT_FAST). Elsewhere, a suite joins by saying `@lane fast` in
//   its opening comment; one under those folders that needs a JVM says `@lane jvm`.
// - `jvm`: everything else. Only this project has the global set-up, so a run of fast suites alone
//   (the fast lane, or `npx jest test/unit/...`) starts no Flink.
const { readdirSync, readFileSync } = require('node:fs');
const { join, relative } = require('node:path');

const FAST_FOLDERS = /^test\/(unit|contract|integration)\//;
// Under those folders but not fast: the gs:// plugin's suites need the GCS emulator, which only the
// full suite's set-up builds (scripts/build-fake-gcs.sh).
const NOT_FAST = /^test\/contract\/gcs/;

function testFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : testFiles(path);
    return e.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** The lane a suite declares in its opening comment, else its folder's. */
function laneOf(file) {
  const declared = /@lane (fast|jvm)\b/.exec(readFileSync(file, 'utf8').slice(0, 2000));
  if (declared) return declared[1];
  const path = relative(__dirname, file).split('\\').join('/');
  return FAST_FOLDERS.test(path) && !NOT_FAST.test(path) ? 'fast' : 'jvm';
}

const lanes = { fast: [], jvm: [] };
for (const file of testFiles(join(__dirname, 'test'))) lanes[laneOf(file)].push(file);

const common = {
  rootDir: __dirname,
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    { ...common, displayName: 'fast', testMatch: lanes.fast },
    {
      ...common,
      displayName: 'jvm',
      testMatch: lanes.jvm,
      globalSetup: '<rootDir>/test/global-setup.ts',
      globalTeardown: '<rootDir>/test/global-teardown.ts',
    },
  ],
  maxWorkers: 2,
  testTimeout: 120000,
  watchman: false,
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
};
