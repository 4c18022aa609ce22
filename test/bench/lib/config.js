'use strict';
/**
 * Workloads of the full and the quick run. The full run sizes its drains from a calibration
 * (see FULL) so it fits in about 15 minutes on 2 cores; every size can be fixed from the
 * command line instead (see run.js --help).
 */

/** Everything each system is measured with; the labels are what the reports print. */
const SYSTEMS = {
  workhorse: {
    adapter: 'workhorse',
    label: 'workhorse (core Worker)',
    short: 'workhorse',
    ours: true,
    settings: 'core `Worker` defaults: LISTEN on, pollMs 1000, leaseMs 30000; pool max 10 (+1 LISTEN, +1 heartbeat connection); one event listener, for `worker.error` only (`worker.on([\'worker.error\'], ...)`)',
  },
  'workhorse-nest': {
    adapter: 'workhorse-nest',
    label: 'workhorse (WorkhorseModule)',
    short: 'workhorse/Nest',
    ours: true,
    settings: '`WorkhorseModule.forRoot({ poolConfig: { max: 10 }, schema: "verify", worker: { concurrency } })`, one `@JobHandler` provider and one `@OnWorkhorseEvent(\'worker.error\')` provider (no `events$` subscriber), Nest application context',
  },
  'workhorse-lanes': {
    adapter: 'workhorse',
    label: 'workhorse (roundTrips 2)',
    short: 'workhorse/2 lanes',
    ours: true,
    options: { roundTrips: 2 },
    settings: 'as the core `Worker` defaults plus `roundTrips: 2` (two claim-and-complete round trips in flight, the slots split between them, each round trip claiming and completing up to its half of the slots); meant for high concurrencies (several hundred slots)',
  },
  'workhorse-python': {
    adapter: 'workhorse-python',
    label: 'workhorse (Python AsyncWorker)',
    short: 'workhorse/Python',
    ours: true,
    settings: 'Python SDK `AsyncWorker(AsyncQueue(AsyncConnectionPool(max_size=10)), concurrency=c)` defaults (LISTEN on, poll_ms 1000), a coroutine no-op handler, Psycopg 3 async; batch enqueue: `AsyncQueue.enqueue_many` of 1,000; its own process, CPU and RSS read from /proc',
  },
  'workhorse-python-sync': {
    adapter: 'workhorse-python',
    label: 'workhorse (Python sync Worker)',
    short: 'workhorse/Python sync',
    ours: true,
    options: { api: 'sync' },
    settings: 'Python SDK sync `Worker(Queue(pool), concurrency=c)` defaults, a plain no-op handler run in its pool of c threads',
  },
  'workhorse-go': {
    adapter: 'workhorse-go',
    label: 'workhorse (Go Worker)',
    short: 'workhorse/Go',
    ours: true,
    settings: 'Go SDK `NewWorker(Pgx(pool), WorkerOptions{Concurrency: c})` defaults (LISTEN on, Poll 1 s, Lease 30 s), pgxpool MaxConns 10 (+1 LISTEN, +1 heartbeat connection), a no-op handler, no event listener; batch enqueue: `Queue.EnqueueMany` of 1,000; its own process (test/bench/go), CPU and RSS read from /proc',
  },
  river: {
    adapter: 'river',
    label: 'River (defaults)',
    short: 'River',
    settings: 'riverqueue/river on riverpgxv5, pgxpool MaxConns 10, `Queues: {default: {MaxWorkers: c}}` and a no-op worker, everything else default (FetchCooldown 100 ms, FetchPollInterval 1 s, completions batched by its async completer); migrations by rivermigrate (what `river migrate-up` runs), preload by `InsertManyFast`, batch enqueue `InsertMany` of 1,000; its own process (test/bench/go). It keeps completed jobs in river_job (its cleaner deletes them after 24 h) and no event or attempt history',
  },
  'river-bench': {
    adapter: 'river',
    label: 'River (its bench settings)',
    short: 'River/bench',
    options: { fetchCooldownMs: 2, fetchPollIntervalMs: 20 },
    settings: 'as River (defaults) plus the fetch settings of `river bench`: FetchCooldown 2 ms, FetchPollInterval 20 ms (its bench also sets MaxWorkers 2000; here MaxWorkers = concurrency, as for every system)',
  },
  graphile: {
    adapter: 'graphile',
    label: 'graphile-worker (defaults)',
    short: 'graphile',
    options: {},
    settings: '`run({ concurrency, maxPoolSize: 10, taskList })`, everything else default (LISTEN on, pollInterval 2000, no local queue, no completion batching)',
  },
  'graphile-batch': {
    adapter: 'graphile',
    label: 'graphile-worker (batching)',
    short: 'graphile+batch',
    options: { batching: true },
    settings: 'as defaults plus `preset.worker`: `localQueue: { size: 500 }`, `completeJobBatchDelay: 0`, `failJobBatchDelay: 0` (the configuration of worker.graphile.org/docs/performance)',
  },
  pgboss: {
    adapter: 'pgboss',
    label: 'pg-boss',
    short: 'pg-boss',
    settings: '`new PgBoss({ max: 10 })`, `work(queue, { batchSize: concurrency, pollingIntervalSeconds: 0.5 }, handler)` (0.5 s is the smallest interval it allows; its default is 2 s; it has no LISTEN)',
  },
};

// A limited queue (see docs/workers.md, flow control): our worker at concurrency 50 draining
// one queue with no policy, a policy that never binds (the policy path's cost), a concurrency
// of 10 and a rate of 1000 a second; pollMs 20 so the worker comes back as the window moves.
const LIMITED = {
  concurrency: 50,
  jobs: 5000,
  capMs: 60_000,
  options: { pollMs: 20 },
  cases: [
    { name: 'none' },
    { name: 'never binding', policy: { concurrency: 100000, rateLimit: { limit: 100000, intervalMs: 1000 } } },
    { name: 'concurrency 10', policy: { concurrency: 10 } },
    { name: 'rate 1000/s', policy: { rateLimit: { limit: 1000, intervalMs: 1000 } } },
  ],
};

/**
 * The full run. Drain sizes are not fixed: a short calibration drain of our worker at
 * concurrency 10 measures its rate R on this machine, and the sizes are chosen so that one of
 * our drains takes about `ourDrainSeconds` (see `sizesFromRate`), capped at the sizes
 * (20,000 jobs per drain, 200,000 for the RSS run). On a machine where our worker drains at
 * 2,000 jobs/s or more the sizes are used as they are; on a slower (or busier) one they
 * shrink so that the whole run still fits in about 15 minutes, and the report says by how much.
 */
const FULL = {
  mode: 'full',
  reps: 3,
  calibration: { jobs: 3000, concurrency: 10 },
  budget: { ourDrainSeconds: 10, ourSerialDrainSeconds: 3, rssSeconds: 90 },
  pgbench: { clients: [1, 4, 10], seconds: 3 },
  enqueue: {
    systems: ['workhorse', 'graphile', 'pgboss', 'workhorse-python', 'workhorse-go', 'river'],
    // Measured with batches only (their producers run in another process, so one enqueue per IPC round trip would measure the pipe).
    batchOnly: ['workhorse-python', 'workhorse-go', 'river'],
    singleJobs: 2000,
    producers: 4,
    batchJobs: 20000,
    batchSize: 1000,
  },
  latency: {
    systems: ['workhorse', 'graphile', 'pgboss'],
    rate: 100,
    seconds: 10,
    concurrency: 10,
    // pg-boss fetches at most batchSize jobs per poll (every 0.5 s): at 10 it could not keep up
    // with 100 jobs/s at all, and the test would measure its backlog instead of its wake-up.
    concurrencyOverride: { pgboss: 100 },
  },
  drain: {
    systems: ['workhorse', 'workhorse-nest', 'workhorse-lanes', 'graphile', 'graphile-batch', 'pgboss', 'workhorse-python', 'workhorse-python-sync', 'workhorse-go', 'river', 'river-bench'],
    concurrencies: [1, 10, 50, 100, 200, 500],
    // The Nest variant runs the same core worker; measured at the default concurrency only.
    // Our worker with one round trip in flight is measured up to 100; with two (roundTrips: 2)
    // at 200 and 500, where each round trip claims and completes 100 or 250 jobs at once: the
    // best configuration we know for many short jobs. graphile-worker with batching runs at
    // every concurrency (its best has been 100 so far). graphile-worker's defaults and pg-boss
    // only get slower or stay poll-bound above 50.
    onlyAt: {
      workhorse: [1, 10, 50, 100],
      'workhorse-nest': [10],
      'workhorse-lanes': [200, 500],
      'workhorse-python': [10, 50],
      'workhorse-python-sync': [10, 50],
      'workhorse-go': [10, 50],
      river: [10, 50],
      'river-bench': [10, 50],
      graphile: [1, 10, 50],
      pgboss: [1, 10, 50],
    },
    jobs: { 1: 5000, 10: 20000, 50: 20000, 100: 20000, 200: 20000, 500: 20000 },
    capMs: 90_000,
    pgbossCapMs: 4000,
  },
  // Five repetitions: run-to-run noise of a 20,000-job drain is about +-10%, as large as the
  // effect this case looks for.
  history: { jobs: 1_000_000, drainJobs: 20000, concurrency: 10, reps: 5 },
  rss: { jobs: 200_000, concurrency: 50, sampleMs: 1000, capMs: 400_000 },
  diagnose: { jobs: 5000, concurrency: 10, systems: ['workhorse', 'graphile', 'graphile-batch'], planCacheRounds: 2, enqueueJobs: 5000 },
  limited: LIMITED,
};

function roundDown(n, step) {
  return Math.floor(n / step) * step;
}

/**
 * Drain sizes for a measured rate R (our jobs/s at concurrency 10): about `ourDrainSeconds` of
 * our worker per drain at concurrency 10 and 50 (our serial rate is roughly a third of R), never
 * above the sizes and never below a floor that keeps a run long enough to time.
 */
function sizesFromRate(cfg, rate) {
  const b = cfg.budget;
  const clamp = (n, lo, hi) => Math.max(lo, Math.min(hi, n));
  const drain = clamp(roundDown(rate * b.ourDrainSeconds, 1000), 3000, cfg.drain.jobs[10]);
  return {
    drainJobs: { 1: clamp(roundDown(rate * b.ourSerialDrainSeconds, 500), 1000, cfg.drain.jobs[1]), 10: drain, 50: drain, 100: drain, 200: drain, 500: drain },
    historyDrainJobs: drain,
    rssJobs: clamp(roundDown(rate * b.rssSeconds, 10000), 20000, cfg.rss.jobs),
};
}

const QUICK = {
  mode: 'quick',
  reps: 1,
  pgbench: { clients: [1, 4, 10], seconds: 1 },
  enqueue: { systems: ['workhorse', 'graphile', 'pgboss', 'workhorse-python', 'workhorse-go', 'river'], batchOnly: ['workhorse-python', 'workhorse-go', 'river'], singleJobs: 600, producers: 4, batchJobs: 4000, batchSize: 1000 },
  latency: { systems: ['workhorse', 'graphile', 'pgboss'], rate: 100, seconds: 3, concurrency: 10, concurrencyOverride: { pgboss: 100 } },
  drain: {
    systems: ['workhorse', 'workhorse-nest', 'graphile', 'graphile-batch', 'pgboss', 'workhorse-python', 'workhorse-python-sync', 'workhorse-go', 'river', 'river-bench'],
    onlyAt: {},
    concurrencies: [10],
    jobs: { 10: 3000 },
    capMs: 30_000,
    pgbossCapMs: 2000,
  },
  history: { jobs: 50_000, drainJobs: 3000, concurrency: 10 },
  rss: null,
  diagnose: { jobs: 2000, concurrency: 10, systems: ['workhorse'], planCacheRounds: 1, enqueueJobs: 2000 },
  limited: { ...LIMITED, jobs: 2000 },

};

module.exports = { SYSTEMS, FULL, QUICK, sizesFromRate };
