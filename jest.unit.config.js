// The fast lane (`npm run test:unit`): every suite that needs no Flink and no JVM — unit tests,
// the fs-plugin contract on real storage servers, integration tests on real HTTP servers, the SSRF
// suite and the Dockerfile checks. No embedded cluster is started. The full suite is `npm test`.
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: [
    '<rootDir>/test/unit/**/*.test.ts',
    '<rootDir>/test/contract/**/*.test.ts',
    '<rootDir>/test/integration/**/*.test.ts',
    '<rootDir>/test/security/ssrf.test.ts',
    '<rootDir>/test/security/credential-endpoints.test.ts',
    '<rootDir>/test/security/path-forms.test.ts',
    '<rootDir>/test/security/dos.test.ts',
    '<rootDir>/test/security/csrf.test.ts',
    '<rootDir>/test/security/log-canaries.test.ts',
    '<rootDir>/test/security/jar-ownership.test.ts',
    '<rootDir>/test/security/jobmanager-answers.test.ts',
    '<rootDir>/test/deploy/dockerfile.test.ts',
  ],
  // bench:smoke starts the embedded Flink cluster (a JVM); it runs in the full suite. The gs:// plugin's
  // suites need the GCS emulator, which only the full suite's set-up builds (scripts/build-fake-gcs.sh).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/integration/bench-smoke.test.ts', '<rootDir>/test/contract/gcs'],
  globalSetup: undefined,
  globalTeardown: undefined,
};
