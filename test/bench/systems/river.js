'use strict';
/**
 * River (riverqueue/river with riverpgxv5), the Go peer, in a Go process (test/bench/go): its
 * migrations (rivermigrate, what `river migrate-up` runs), preload with `InsertManyFast`, a
 * client with `MaxWorkers` = concurrency and a no-op worker, and `InsertMany` of 1,000.
 * River keeps completed jobs in river_job (until its cleaner deletes them after 24 h), so a
 * job is pending while it is available, running, retryable or scheduled.
 */
const { goSystem, moduleVersion, runToEnd } = require('../lib/go-bench');

module.exports = {
  schema: 'public',
  version: () => moduleVersion('github.com/riverqueue/river'),
  async install({ url }) {
    runToEnd(['migrate', 'river', url]);
  },
  async preload({ url, count }) {
    runToEnd(['preload', 'river', url, String(count)]);
  },
  pendingSql: "SELECT count(*)::int AS n FROM river_job WHERE state IN ('available', 'running', 'retryable', 'scheduled', 'pending')",
  ...goSystem('river'),
};
