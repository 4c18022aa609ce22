/** The ESM-only packages the suite requires (their files under node_modules), for the transform below. */
const ESM_ONLY_PACKAGES = '/node_modules/@nestjs/.+\\.js$';

/** @type {import('jest').Config} */
module.exports = {
  preset: 'ts-jest',
  testEnvironment: 'node',
  rootDir: __dirname,
  roots: ['<rootDir>/test', '<rootDir>/lib'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  moduleNameMapper: {
    '^nestjs-workhorse$': '<rootDir>/lib/index.ts',
    '^nestjs-workhorse/(.*)$': '<rootDir>/lib/$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }],
    // Nest 12's packages are ESM-only. Node 20.19+ loads them with require(esm), and so does the
    // package in an application; Jest's own module loader can do that only on Node 24.9+, so on
    // Node 20 it loads them through this transform to CommonJS (import.meta included). See
    // docs/decisions.md, "Nest 12 under Jest on Node 20".
    [ESM_ONLY_PACKAGES]: ['@swc/jest', { swcrc: false, module: { type: 'commonjs' }, jsc: { target: 'es2022', parser: { syntax: 'ecmascript' } } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!(@nestjs)/)'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  // The default output, then the skipped tests by name (a skipped test's name says why it skipped).
  reporters: ['default', '<rootDir>/test/support/skipped-tests-reporter.js'],
  testTimeout: 60000,
  maxWorkers: 2,
  // How long a test worker may take to exit after its last file. Jest's default is 500 ms, and
  // on the 2-core CI machine a worker that has run half the suite takes 450-520 ms from its
  // 'exit' event (fired 1 ms after Jest asks it to stop, with no handle left open) until the
  // process is gone: the time is spent tearing down the process, not waiting on a leak. A worker
  // that really hangs on an open handle still gets reported, only after 5 s.
  workerGracefulExitTimeout: 5000,
};
