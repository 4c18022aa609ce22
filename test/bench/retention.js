#!/usr/bin/env node
'use strict';
/**
 * Retention under load: does a drain keep its rate while retention removes finished jobs and
 * drops partitions, and does any claim wait on a lock retention holds?
 *
 *   node test/bench/retention.js --finished 1000000 --jobs 20000 --pairs 2
 *
 * Seeds `--finished` jobs that finished 40 days ago (and 20-day-old history partitions), then in
 * alternating pairs drains `--jobs` no-op jobs (one worker, concurrency 50) once with retention
 * off and once on. On: the worker's own maintenance ticks apply it (`--mode tick`, the default:
 * 1000 jobs per tick), or `retention_run_v1(10000)` runs back to back on another connection
 * (`--mode loop`: as fast as retention goes). Samples pg_stat_activity every 20 ms for worker
 * backends waiting on a lock. Prints each drain's rate, the purge rate, the lock waits, and
 * `health_v1()`'s time on the seeded database.
 */
const { startServer } = require('./lib/server');
require('../support/ts-register.js');
const { Pool } = require('pg');
const { installSchema, Queue, Worker } = require('../../lib/core/index.ts');

function parseArgs(argv) {
  const args = { finished: 1_000_000, jobs: 20_000, pairs: 2, mode: 'tick' };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    args[key] = key === 'mode' ? argv[i + 1] : Number(argv[i + 1]);
  }
  return args;
}

const log = (m) => process.stderr.write(`[retention] ${m}\n`);

async function seed(pool, n) {
  // Ids of 40 days ago, one per millisecond (job_id_floor), so the walk meets them in order.
  for (let done = 0; done < n; done += 100_000) {
    const count = Math.min(100_000, n - done);
    await pool.query(
      `WITH s AS (SELECT g, workhorse.job_id_floor(clock_timestamp() - interval '40 days' + g * interval '1 millisecond') AS id,
                         nextval('workhorse.job_seq') AS seq
                  FROM generate_series($1::int, $1::int + $2::int - 1) g),
       j AS (INSERT INTO workhorse.job (id, queue, type, payload, priority, max_attempts, tags, run_at, created_at, seq)
             SELECT id, 'old', 'old', '{}', 0, 1, '{}', clock_timestamp() - interval '40 days', clock_timestamp() - interval '40 days', seq FROM s),
       q AS (INSERT INTO workhorse.job_query (seq, job_id, queue, type, created_at)
             SELECT seq, id, 'old', 'old', clock_timestamp() - interval '40 days' FROM s)
       INSERT INTO workhorse.job_outcome (job_id, queue, state, result, final_attempt, finished_at)
       SELECT id, 'old', 'succeeded', 'null', 1, clock_timestamp() - interval '40 days' FROM s`,
      [done, count],
    );
  }
  for (let d = 20; d < 24; d++) {
    await pool.query("SELECT workhorse.ensure_history_partition('job_event', 'at', (current_date - $1::int))", [d]);
  }
  await pool.query('VACUUM ANALYZE workhorse.job, workhorse.job_outcome, workhorse.job_query');
}

async function drain(url, jobs, retention, mode) {
  const pool = new Pool({ connectionString: url, max: 10, application_name: 'drain' });
  const queue = new Queue(pool);
  for (let i = 0; i < jobs; i += 1000) {
    await queue.enqueueMany(Array.from({ length: Math.min(1000, jobs - i) }, () => ({ type: 'noop', payload: {}, queue: 'bench' })));
  }
  const side = new Pool({ connectionString: url, max: 2, application_name: 'retention' });
  let stop = false;
  let purged = 0;
  let waits = 0;
  let samples = 0;
  const purging = (async () => {
    while (retention && mode === 'loop' && !stop) {
      const { rows } = await side.query('SELECT workhorse.retention_run_v1(10000, true) AS r');
      purged += rows[0].r.jobsPurged ?? 0;
    }
  })();
  const sampling = (async () => {
    while (!stop) {
      const { rows } = await side.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'drain' AND wait_event_type = 'Lock'",
      );
      waits += rows[0].n;
      samples++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const purgedBefore = (await side.query('SELECT jobs_purged FROM workhorse.retention_state')).rows[0].jobs_purged;
  let finished = 0;
  const worker = new Worker(queue, { queues: ['bench'], concurrency: 50, tickMs: 1000 }).handle('noop', () => {
    finished++;
  });
  const started = Date.now();
  const running = worker.run();
  while (finished < jobs) await new Promise((r) => setTimeout(r, 10));
  const seconds = (Date.now() - started) / 1000;
  await worker.stop();
  await running;
  stop = true;
  await Promise.all([purging, sampling]);
  if (mode === 'tick') purged = (await side.query('SELECT jobs_purged FROM workhorse.retention_state')).rows[0].jobs_purged - purgedBefore;
  await side.end();
  await pool.end();
  return { rate: jobs / seconds, purgedPerSecond: purged / seconds, lockWaitSamples: waits, samples };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const server = await startServer({ log });
  const admin = new Pool({ connectionString: server.url, max: 1 });
  await admin.query('CREATE DATABASE retention_bench');
  const url = server.url.replace(/\/[^/]*$/, '/retention_bench');
  const pool = new Pool({ connectionString: url, max: 2 });
  try {
    await installSchema(pool);
    log(`seeding ${args.finished} finished jobs`);
    await seed(pool, args.finished);
    const times = [];
    for (let i = 0; i < 5; i++) {
      const t = process.hrtime.bigint();
      await pool.query('SELECT workhorse.health_v1()');
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    log(`health_v1 with ${args.finished} finished jobs: ${times.map((t) => t.toFixed(1)).join(', ')} ms`);
    // Retention off unless a drain runs it itself.
    await pool.query(`SELECT workhorse.set_retention_v1('{"enabled": true}')`);
    const rows = [];
    for (let p = 0; p < args.pairs; p++) {
      for (const retention of p % 2 === 0 ? [false, true] : [true, false]) {
        if (!retention) await pool.query(`SELECT workhorse.set_retention_v1('{"enabled": false}')`);
        else await pool.query(`SELECT workhorse.set_retention_v1('{"enabled": true}')`);
        const r = await drain(url, args.jobs, retention, args.mode);
        rows.push({ pair: p + 1, retention, ...r });
        log(`pair ${p + 1} retention ${retention ? 'on ' : 'off'}: ${r.rate.toFixed(0)} jobs/s, purged ${r.purgedPerSecond.toFixed(0)}/s, lock-wait samples ${r.lockWaitSamples}/${r.samples}`);
      }
    }
    const status = (await pool.query('SELECT workhorse.retention_status_v1() AS s')).rows[0].s;
    log(`retention: ${status.jobsPurged} jobs purged, ${status.partitionsDropped} partitions dropped, ${status.lockTimeouts} lock timeouts`);
    for (let p = 1; p <= args.pairs; p++) {
      const off = rows.find((r) => r.pair === p && !r.retention);
      const on = rows.find((r) => r.pair === p && r.retention);
      process.stdout.write(`pair ${p}: off ${off.rate.toFixed(0)} jobs/s, on ${on.rate.toFixed(0)} jobs/s, on/off ${(on.rate / off.rate).toFixed(3)}, purged ${on.purgedPerSecond.toFixed(0)} jobs/s, claim lock waits ${on.lockWaitSamples}\n`);
    }
  } finally {
    await pool.end();
    await admin.query('DROP DATABASE IF EXISTS retention_bench WITH (FORCE)').catch(() => undefined);
    await admin.end();
    await server.stop();
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
