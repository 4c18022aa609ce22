'use strict';
/**
 * The Go SDK (sdk/go) in the benchmark: `workhorse.NewWorker(workhorse.Pgx(pool), {Concurrency})`
 * with a no-op handler, and `Queue.EnqueueMany` of 1,000, in a Go process (test/bench/go).
 * Install and preload use the TypeScript core (same SQL functions).
 */
const { goSystem, moduleVersion } = require('../lib/go-bench');
const core = require('./workhorse');

module.exports = {
  schema: 'workhorse',
  version: () => `pgx ${moduleVersion('github.com/jackc/pgx/v5')}`,
  install: core.install,
  preload: core.preload,
  pendingSql: core.pendingSql,
  ...goSystem('workhorse-go'),
};
