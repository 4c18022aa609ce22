#!/usr/bin/env node
'use strict';
/**
 * Claim latency of a queue with a per-key limit (issue 34 item 1): 10,000 keys with a few ready
 * jobs each, and one hot key holding 100,000 ready jobs, enqueued first (so they lead the
 * queue's claim order) and saturated (its n jobs are active).
 *
 *   node test/bench/per-key.js --keys 10000 --hot 100000 --perKey 2 --claims 300
 *
 * Measures `claim_many_v1` at limit 1 and 10 on that queue, and, for comparison, the same claims
 * on a queue with the same backlog and no policy. Each measured claim runs in a transaction that
 * is rolled back, so every claim sees the same backlog. Prints p50 / p95 / max in ms.
 */
const { startServer } = require('./lib/server');
require('../support/ts-register.js');
const { Pool } = require('pg');
const { installSchema } = require('../../lib/core/index.ts');

function parseArgs(argv) {
  const args = { keys: 10_000, hot: 100_000, perKey: 2, claims: 300, perKeyJobs: 3 };
  for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = Number(argv[i + 1]);
  return args;
}

const log = (m) => process.stderr.write(`[per-key] ${m}\n`);

// Ready jobs written straight into the tables, as enqueue_batch writes them (the benchmark is
// about the claim, not the enqueue): `count` jobs per key of `keys` (null: no key).
async function seed(pool, queue, keys, count) {
  await pool.query(
    `WITH s AS (SELECT k.key, workhorse.new_job_id() AS id, nextval('workhorse.job_seq') AS seq
                FROM unnest($2::text[]) AS k (key), generate_series(1, $3::int) AS g),
     j AS (INSERT INTO workhorse.job (id, queue, type, payload, priority, max_attempts, tags, run_at, created_at, seq, concurrency_key)
           SELECT id, $1, 'bench', '{}', 0, 25, '{}', clock_timestamp(), clock_timestamp(), seq, key FROM s),
     q AS (INSERT INTO workhorse.job_query (seq, job_id, queue, type, created_at)
           SELECT seq, id, $1, 'bench', clock_timestamp() FROM s)
     INSERT INTO workhorse.job_runtime (job_id, queue, priority, state, seq, run_at, max_attempts, concurrency_key)
     SELECT id, $1, 0, 'ready', seq, clock_timestamp(), 25, key FROM s`,
    [queue, keys, count],
  );
}

function stats(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  return { p50: at(0.5), p95: at(0.95), max: sorted[sorted.length - 1] };
}

async function measure(pool, queue, limit, claims) {
  const client = await pool.connect();
  const times = [];
  let claimed = 0;
  try {
    for (let i = 0; i < claims; i++) {
      await client.query('BEGIN');
      const t = process.hrtime.bigint();
      const { rowCount } = await client.query('SELECT job_id FROM workhorse.claim_many_v1($1, $2, $3, 60000)', [[queue], 'bench-worker', limit]);
      times.push(Number(process.hrtime.bigint() - t) / 1e6);
      claimed += rowCount;
      await client.query('ROLLBACK');
    }
  } finally {
    client.release();
  }
  return { ...stats(times), claimedPerCall: claimed / claims };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const server = await startServer({ log });
  const admin = new Pool({ connectionString: server.url, max: 1 });
  await admin.query('DROP DATABASE IF EXISTS per_key_bench WITH (FORCE)');
  await admin.query('CREATE DATABASE per_key_bench');
  const url = server.url.replace(/\/[^/]*$/, '/per_key_bench');
  const pool = new Pool({ connectionString: url, max: 2 });
  try {
    await installSchema(pool);
    const keys = Array.from({ length: args.keys }, (_, i) => `tenant-${String(i).padStart(5, '0')}`);
    for (const queue of ['fair', 'plain']) {
      log(`seeding ${queue}: hot key ${args.hot} jobs, then ${args.keys} keys x ${args.perKeyJobs}`);
      await seed(pool, queue, ['hot'], args.hot);
      for (let i = 0; i < keys.length; i += 2000) await seed(pool, queue, keys.slice(i, i + 2000), args.perKeyJobs);
    }
    await pool.query('VACUUM ANALYZE workhorse.job, workhorse.job_runtime, workhorse.job_query');
    await pool.query(`SELECT workhorse.set_queue_policy_v1('fair', $1::jsonb)`, [JSON.stringify({ perKey: { concurrency: args.perKey } })]);
    // The hot key saturated: its first n jobs active (claimed and committed).
    await pool.query(
      `WITH h AS (SELECT job_id FROM workhorse.job_runtime WHERE queue = 'fair' AND concurrency_key = 'hot' ORDER BY seq LIMIT $1)
       UPDATE workhorse.job_runtime r SET state = 'active', current_attempt = 1, fence_token = 1, worker_id = 'seed',
              lease_expires_at = clock_timestamp() + interval '1 hour', heartbeat_at = clock_timestamp(), attempt_started_at = clock_timestamp()
       FROM h WHERE r.job_id = h.job_id`,
      [args.perKey],
    );
    const rows = [];
    for (const limit of [1, 10]) {
      for (const queue of ['fair', 'plain']) {
        await measure(pool, queue, limit, 20); // warm-up
        const r = await measure(pool, queue, limit, args.claims);
        rows.push({ queue, limit, ...r });
        log(`${queue === 'fair' ? 'perKey policy' : 'no policy    '} limit ${String(limit).padStart(2)}: p50 ${r.p50.toFixed(2)} ms, p95 ${r.p95.toFixed(2)} ms, max ${r.max.toFixed(2)} ms, ${r.claimedPerCall.toFixed(1)} jobs per claim`);
      }
    }
    // How much of the indexes one claim reads (index entries, from the statistics views): the
    // hot key's backlog must not be among them.
    const client = await pool.connect();
    try {
      const read = async () => {
        await client.query('SELECT pg_stat_force_next_flush()');
        await client.query('SELECT pg_stat_clear_snapshot()');
        const { rows: r } = await client.query(
          "SELECT indexrelname AS name, idx_tup_read::int AS n FROM pg_stat_user_indexes WHERE indexrelname IN ('job_runtime_key_ready_idx', 'job_runtime_ready_idx', 'job_runtime_key_active_idx')",
        );
        return Object.fromEntries(r.map((x) => [x.name, x.n]));
      };
      for (const limit of [1, 10]) {
        const before = await read();
        await client.query('BEGIN');
        await client.query('SELECT job_id FROM workhorse.claim_many_v1($1, $2, $3, 60000)', [['fair'], 'bench-worker', limit]);
        await client.query('ROLLBACK');
        const after = await read();
        const delta = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] ?? 0)]));
        rows.push({ queue: 'fair', limit, indexEntriesRead: delta });
        log(`one claim of ${limit} read index entries: ${JSON.stringify(delta)}`);
      }
    } finally {
      client.release();
    }
    process.stdout.write(`${JSON.stringify({ args, rows }, null, 2)}\n`);
  } finally {
    await pool.end();
    await admin.query('DROP DATABASE IF EXISTS per_key_bench WITH (FORCE)').catch(() => undefined);
    await admin.end();
    await server.stop();
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
