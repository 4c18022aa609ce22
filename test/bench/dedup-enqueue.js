#!/usr/bin/env node
'use strict';
/**
 * What deduplication windows cost a job that does not use them: `enqueue_many_v1` of plain
 * requests, one job per call and batches of 1000, on the schema of a git ref (default f5e29b4,
 * before the feature) and on the working tree's, in alternating pairs (A B, B A, ...), each in its
 * own database on one embedded PostgreSQL with durable settings:
 * `node test/bench/dedup-enqueue.js [--ref f5e29b4] [--pairs 6] [--single 2000] [--batches 20]`.
 *
 * Every round runs inside one transaction (committed at its end) and each kind of call in one
 * statement, so the time is the function's own, not the commit's fsync nor the round trips. Prints each round and, per pair, the working tree's time as a
 * multiple of the ref's, then the medians.
 */
const { execFileSync } = require('node:child_process');
const { readdirSync, readFileSync } = require('node:fs');
const { join } = require('node:path');
const { Client } = require('pg');
const { startServer } = require('./lib/server');

const ROOT = join(__dirname, '..', '..');

function parseArgs(argv) {
  const args = { ref: 'f5e29b4', pairs: 6, single: 2000, batches: 20 };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in args)) throw new Error(`unknown option ${argv[i]}`);
    args[key] = key === 'ref' ? argv[i + 1] : Number(argv[i + 1]);
  }
  return args;
}

/** The installation files (sql/*.sql, in name order) of a git ref, or of the working tree. */
function installFiles(ref) {
  if (ref === null) {
    const dir = join(ROOT, 'sql');
    return readdirSync(dir).filter((f) => f.endsWith('.sql')).sort().map((f) => readFileSync(join(dir, f), 'utf8'));
  }
  const names = execFileSync('git', ['ls-tree', '--name-only', `${ref}:sql`], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f.endsWith('.sql'))
    .sort();
  return names.map((f) => execFileSync('git', ['show', `${ref}:sql/${f}`], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 }));
}

async function install(url, files) {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    for (const sql of files) await client.query(sql);
  } finally {
    await client.end();
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * One round, in one transaction and one statement each (so neither the commit nor the client's
 * round trips are timed): `single` one-job calls, then `batches` calls of 1000 jobs; µs per call.
 */
async function round(client, args, seed) {
  const singles = `SELECT count(*) FROM generate_series(1, $1::integer) AS g,
                   LATERAL workhorse.enqueue_many_v1(jsonb_build_array(jsonb_build_object('type', 'bench.job', 'payload', jsonb_build_object('n', g, 'seed', $2::integer)))) AS e`;
  const batches = `SELECT count(*) FROM generate_series(1, $1::integer) AS b,
                   LATERAL workhorse.enqueue_many_v1((SELECT jsonb_agg(jsonb_build_object('type', 'bench.job', 'payload', jsonb_build_object('n', g, 'b', b, 'seed', $2::integer)))
                                                      FROM generate_series(1, 1000) AS g)) AS e`;
  await client.query('BEGIN');
  // (Warm the plan cache of this connection.)
  await client.query(singles, [50, seed]);
  let t = process.hrtime.bigint();
  await client.query(singles, [args.single, seed]);
  const single = Number(process.hrtime.bigint() - t) / 1e3 / args.single;
  t = process.hrtime.bigint();
  await client.query(batches, [args.batches, seed]);
  const batched = Number(process.hrtime.bigint() - t) / 1e3 / args.batches;
  await client.query('COMMIT');
  return { single, batched };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const server = await startServer({ log: (m) => console.error(m) });
  try {
    const variants = [
      { name: `ref ${args.ref}`, files: installFiles(args.ref), db: 'dedup_bench_before' },
      { name: 'working tree', files: installFiles(null), db: 'dedup_bench_after' },
    ];
    const clients = [];
    for (const v of variants) {
      await server.dropDatabase(v.db);
      const url = await server.createDatabase(v.db);
      await install(url, v.files);
      const client = new Client({ connectionString: url });
      await client.connect();
      clients.push(client);
    }
    const ratios = { single: [], batched: [] };
    for (let p = 0; p < args.pairs; p++) {
      const order = p % 2 === 0 ? [0, 1] : [1, 0];
      const got = [];
      for (const k of order) {
        got[k] = await round(clients[k], args, p);
        console.log(`pair ${p + 1} ${variants[k].name}: one job ${got[k].single.toFixed(1)} µs/call, batch of 1000 ${(got[k].batched / 1000).toFixed(2)} ms/call`);
      }
      ratios.single.push(got[1].single / got[0].single);
      ratios.batched.push(got[1].batched / got[0].batched);
      console.log(`pair ${p + 1} working tree / ref: one job ${ratios.single[p].toFixed(3)}, batch ${ratios.batched[p].toFixed(3)}`);
    }
    console.log(`median working tree / ref: one job ${median(ratios.single).toFixed(3)}, batch of 1000 ${median(ratios.batched).toFixed(3)}`);
    for (const c of clients) await c.end();
    for (const v of variants) await server.dropDatabase(v.db);
  } finally {
    await server.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
