#!/usr/bin/env node
'use strict';
/**
 * Lock time of the migration steps on a large database (issue 29, item 5):
 *
 *   npm run bench:migration-locks -- --finished 1000000 --live 100000
 *
 * Installs the baseline schema (version 4, the sql/ of commit a46ad78 from git history), seeds
 * `--finished` succeeded jobs (job, job_query, job_outcome, two job_event rows and one
 * attempt_history row each, in today's partitions) and `--live` ready jobs (through Queue), then
 * applies each shipped step, and after them typical steps a later release might bring (not
 * shipped): a nullable column on job_runtime, a column with a constant default on job_outcome, a
 * new function version, and an index built CONCURRENTLY on job_outcome (a no-transaction step).
 * Meanwhile a probe connection enqueues and claims a job in a loop; per step it prints how long
 * the step took (its transaction holds its locks that long at most), the longest probe round
 * trip during it, and whether any history table was rewritten (its relfilenode changed).
 * Not part of CI. Uses the embedded server (durable) or BENCH_DATABASE_URL (a superuser URL).
 */
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { parseArgs: parseArgsOf } = require('node:util');
const { performance } = require('node:perf_hooks');
const { startServer } = require('./lib/server');
require('../support/ts-register.js');
const { Pool } = require('pg');
const { Queue } = require('../../lib/core/index.ts');
const { readMigrationSteps } = require('../../lib/core/migration-steps.ts');
const { MIGRATIONS_DIR, SQL_DIR } = require('../../lib/core/schema.ts');
const { migrateSchema } = require('../../lib/core/schema-migrator.ts');

const BASELINE_COMMIT = 'a46ad78';
const ROOT = path.resolve(__dirname, '..', '..');
const log = (m) => process.stderr.write(`[migration-locks] ${m}\n`);

function parseArgs(argv) {
  const { values } = parseArgsOf({
    args: argv,
    options: { finished: { type: 'string', default: '1000000' }, live: { type: 'string', default: '100000' } },
  });
  return { finished: Number(values.finished), live: Number(values.live) };
}

function git(args) {
  return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

async function installBaseline(pool) {
  const names = git(['ls-tree', '--name-only', BASELINE_COMMIT, 'sql/']).split('\n').filter((p) => /^sql\/[^/]+\.sql$/.test(p)).sort();
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    for (const name of names) await client.query(git(['show', `${BASELINE_COMMIT}:${name}`]));
    await client.query('INSERT INTO workhorse.schema_version (version) VALUES (4)');
    await client.query('COMMIT');
  } finally {
    client.release();
  }
}

async function seedFinished(pool, n) {
  for (let done = 0; done < n; done += 100_000) {
    const count = Math.min(100_000, n - done);
    await pool.query(
      `WITH s AS (SELECT g, workhorse.new_job_id() AS id, nextval('workhorse.job_seq') AS seq,
                         clock_timestamp() - interval '10 minutes' AS t
                  FROM generate_series(1, $1::int) g),
       j AS (INSERT INTO workhorse.job (id, queue, type, payload, priority, max_attempts, tags, run_at, created_at, seq)
             SELECT id, 'done', 'done', jsonb_build_object('g', g), 0, 1, '{}', t, t, seq FROM s),
       q AS (INSERT INTO workhorse.job_query (seq, job_id, queue, type, created_at) SELECT seq, id, 'done', 'done', t FROM s),
       e AS (INSERT INTO workhorse.job_event (job_id, at, kind) SELECT id, t, k FROM s, unnest(ARRAY['enqueued', 'succeeded']) k),
       a AS (INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at)
             SELECT id, 1, 'succeeded', 'seed', seq, t, t FROM s)
       INSERT INTO workhorse.job_outcome (job_id, queue, state, result, final_attempt, finished_at)
       SELECT id, 'done', 'succeeded', 'null', 1, t FROM s`,
      [count],
    );
    log(`finished jobs: ${done + count}`);
  }
}

async function seedLive(pool, n) {
  const queue = new Queue(pool);
  for (let done = 0; done < n; done += 1000) {
    await queue.enqueueMany(Array.from({ length: Math.min(1000, n - done) }, (_, i) => ({ type: 'live', payload: { i: done + i }, queue: 'live' })));
  }
  log(`live jobs: ${n}`);
}

/** The history tables' files: a rewrite gives a table a new relfilenode. */
async function relfilenodes(pool) {
  const { rows } = await pool.query(
    `SELECT c.relname, c.relfilenode FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'workhorse' AND c.relkind = 'r'
       AND (c.relname IN ('job', 'job_outcome', 'job_query', 'job_runtime') OR c.relname ~ '^(job_event|attempt_history)_')`,
  );
  return new Map(rows.map((r) => [r.relname, r.relfilenode]));
}

/** Enqueues and claims one job in a loop, and keeps the longest round trip. */
function startProbe(url) {
  const pool = new Pool({ connectionString: url, max: 2, application_name: 'probe' });
  const queue = new Queue(pool);
  let stop = false;
  let worst = 0;
  let rounds = 0;
  const running = (async () => {
    while (!stop) {
      const started = performance.now();
      await queue.enqueue('probe', {}, { queue: 'probe' });
      await pool.query("SELECT * FROM workhorse.claim_many_v1(ARRAY['probe'], 'probe-worker', 1, 30000)");
      worst = Math.max(worst, performance.now() - started);
      rounds++;
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    rounds: () => rounds,
    reset() {
      const result = { worst, rounds };
      worst = 0;
      rounds = 0;
      return result;
    },
    async end() {
      stop = true;
      await running;
      await pool.end();
    },
  };
}

const TYPICAL_STEPS = [
  { name: 'runtime_nullable_column', transactional: true, sql: 'ALTER TABLE workhorse.job_runtime ADD COLUMN bench_note text' },
  { name: 'outcome_column_with_default', transactional: true, sql: "ALTER TABLE workhorse.job_outcome ADD COLUMN bench_flag boolean NOT NULL DEFAULT false" },
  {
    name: 'function_version',
    transactional: true,
    sql: `CREATE FUNCTION workhorse.bench_probe_v2(p integer) RETURNS integer LANGUAGE sql STABLE AS $$ SELECT p + 1 $$;
          REVOKE ALL ON FUNCTION workhorse.bench_probe_v2(integer) FROM PUBLIC;`,
  },
  {
    name: 'outcome_index_concurrently',
    transactional: false,
    sql: 'CREATE INDEX CONCURRENTLY IF NOT EXISTS job_outcome_bench_idx ON workhorse.job_outcome (queue, finished_at)',
  },
];

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const server = await startServer({ log });
  const database = `migration_locks_${Date.now()}`;
  await server.withClient((client) => client.query(`CREATE DATABASE ${database}`));
  const url = server.databaseUrl(database);
  const pool = new Pool({ connectionString: url, max: 4 });
  try {
    await installBaseline(pool);
    await seedFinished(pool, args.finished);
    await seedLive(pool, args.live);
    await pool.query('VACUUM ANALYZE');
    const shipped = readMigrationSteps(MIGRATIONS_DIR);
    const last = shipped[shipped.length - 1].version;
    const steps = [
      ...shipped.map((s) => ({ ...s, shipped: true })),
      ...TYPICAL_STEPS.map((s, i) => ({ ...s, version: last + 1 + i, file: `${String(last + 1 + i).padStart(4, '0')}_${s.name}.sql`, shipped: false })),
    ];
    const before = await relfilenodes(pool);
    const probe = startProbe(url);
    // Warm the probe up (connections, plans), then take its worst round trip with no migration.
    while (probe.rounds() < 50) await new Promise((r) => setTimeout(r, 50));
    probe.reset();
    await new Promise((r) => setTimeout(r, 3000));
    const idle = probe.reset();
    const results = [];
    for (const step of steps) {
      const source = { installSql: () => [], steps: () => steps, target: step.version, minimum: 4 };
      probe.reset();
      const client = await pool.connect();
      const started = performance.now();
      try {
        await migrateSchema(pool, client, source);
      } finally {
        client.release();
      }
      const ms = performance.now() - started;
      await new Promise((r) => setTimeout(r, 50));
      const { worst, rounds } = probe.reset();
      results.push({ step: step.file, shipped: step.shipped, transactional: step.transactional, ms, probeWorstMs: worst, probeRounds: rounds });
      log(`${step.file}: ${ms.toFixed(1)} ms, probe worst ${worst.toFixed(1)} ms over ${rounds} rounds`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    await probe.end();
    const after = await relfilenodes(pool);
    const rewritten = [...before].filter(([name, node]) => after.get(name) !== node).map(([name]) => name);
    const sizes = await pool.query(
      `SELECT (SELECT count(*) FROM workhorse.job_outcome)::int AS finished, (SELECT count(*) FROM workhorse.job_runtime)::int AS live,
              pg_size_pretty(pg_database_size(current_database())) AS size, version() AS server`,
    );
    process.stdout.write(
      `${JSON.stringify({ ...sizes.rows[0], probeIdle: idle, results, rewrittenTables: rewritten }, null, 2)}\n`,
    );
  } finally {
    await pool.end();
    await server.withClient((client) => client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)).catch(() => undefined);
    await server.stop();
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
