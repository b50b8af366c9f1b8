// One jest run covers unit, integration (real node:http origins) and e2e (the real embedded Flink
// cluster, started once per run by test/global-setup.ts and shared by the e2e tests).
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  globalSetup: '<rootDir>/test/global-setup.ts',
  globalTeardown: '<rootDir>/test/global-teardown.ts',
  maxWorkers: 2,
  testTimeout: 120000,
  watchman: false,
  reporters: ['default', '<rootDir>/test/summary-reporter.js'],
};
