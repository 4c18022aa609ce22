#!/usr/bin/env node
'use strict';
/**
 * The maintenance tick's cost with many schedules (issue 31, item 1): the server plans and fires
 * every schedule inside tick_v1, so this measures tick_v1 on a database with no schedules, then
 * with `--schedules` (default 10,000) synced in 10 namespaces (a mix: daily at random minutes in
 * five zones, hourly, every 5 minutes, every minute, and 1% every second), ticking once a second
 * for `--seconds` (default 90), and last the worst case: every schedule due for planning at once
 * (replan_at moved to the past), ticked until all are planned again. With `--mix idle` the
 * schedules are daily, 12 hours away: what many schedules cost a tick that has nothing to fire.
 * Prints JSON: the sync's
 * time, the tick's median, p95 and max in each phase, and the ratio to the empty database.
 *
 *   node test/bench/schedules-tick.js --schedules 10000 --seconds 90 [--mix mixed|idle]
 *
 * Not part of CI (no timed assertion anywhere). Uses the embedded server (durable) or
 * BENCH_DATABASE_URL (a superuser URL). Results: docs/benchmarks/schedules-tick.md.
 */
const { parseArgs } = require('node:util');
const { performance } = require('node:perf_hooks');
const { startServer } = require('./lib/server');
require('../support/ts-register.js');
const { Pool } = require('pg');
const { installSchema, Queue } = require('../../lib/core/index.ts');

const log = (m) => process.stderr.write(`[schedules-tick] ${m}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  const round = (x) => Math.round(x * 100) / 100;
  return { ticks: sorted.length, medianMs: round(at(0.5)), p95Ms: round(at(0.95)), maxMs: round(sorted[sorted.length - 1]) };
}

async function tick(pool) {
  const started = performance.now();
  const { rows } = await pool.query('SELECT workhorse.tick_v1() AS t');
  return { ms: performance.now() - started, result: rows[0].t };
}

/** Ticks once a second for `seconds`; returns the durations and the planned/fired totals. */
async function tickFor(pool, seconds) {
  const samples = [];
  let planned = 0;
  let fired = 0;
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const { ms, result } = await tick(pool);
    samples.push(ms);
    planned += result.schedulesPlanned ?? 0;
    fired += result.schedulesFired ?? 0;
    await sleep(Math.max(0, 1000 - ms));
  }
  return { ...stats(samples), schedulesPlanned: planned, schedulesFired: fired };
}

function definitions(count, mix) {
  const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Australia/Sydney'];
  const list = [];
  // idle: daily, 12 hours from now in UTC, so none comes due during the run.
  const idleHour = (new Date().getUTCHours() + 12) % 24;
  for (let i = 0; i < count; i++) {
    if (mix === 'idle') {
      list.push({ key: `s${i}`, type: 'bench.daily', cron: `${i % 60} ${idleHour} * * *` });
      continue;
    }
    const kind = i % 100;
    const cron =
      kind < 40 ? `${i % 60} ${i % 24} * * *` : kind < 70 ? `${i % 60} * * * *` : kind < 90 ? '*/5 * * * *' : kind < 99 ? '* * * * *' : '* * * * * *';
    list.push({ key: `s${i}`, type: `bench.${kind < 99 ? 'periodic' : 'second'}`, cron, timezone: zones[i % zones.length] });
  }
  return list;
}

async function main() {
  const { values } = parseArgs({ options: { schedules: { type: 'string', default: '10000' }, seconds: { type: 'string', default: '90' }, mix: { type: 'string', default: 'mixed' } } });
  const count = Number(values.schedules);
  const seconds = Number(values.seconds);
  const server = await startServer({ log });
  const database = `schedules_tick_${Date.now()}`;
  await server.withClient((client) => client.query(`CREATE DATABASE ${database}`));
  const pool = new Pool({ connectionString: server.databaseUrl(database), max: 2 });
  try {
    await installSchema(pool);
    for (let i = 0; i < 5; i++) await tick(pool); // partitions, warm caches
    log('ticking with no schedules');
    const empty = await tickFor(pool, Math.min(seconds, 30));

    const all = definitions(count, values.mix);
    const queue = new Queue(pool);
    const syncStarted = performance.now();
    for (let n = 0; n < all.length; n += 1000) await queue.syncSchedules(`bench-${n / 1000}`, all.slice(n, n + 1000));
    const syncMs = Math.round(performance.now() - syncStarted);
    log(`synced ${count} schedules in ${syncMs} ms; ticking for ${seconds} s`);
    const steady = await tickFor(pool, seconds);

    log('every schedule due for planning at once');
    await pool.query(`UPDATE workhorse.schedule SET replan_at = '-infinity'`);
    const replan = [];
    const replanStarted = performance.now();
    for (;;) {
      const { ms, result } = await tick(pool);
      replan.push(ms);
      if ((result.schedulesPlanned ?? 0) < 500) break;
    }
    const replanAll = { ...stats(replan), totalMs: Math.round(performance.now() - replanStarted) };

    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM workhorse.schedule_occurrence WHERE state = 'planned'`);
    const version = (await pool.query('SHOW server_version')).rows[0].server_version;
    const result = {
      postgres: version,
      mix: values.mix,
      schedules: count,
      syncMs,
      plannedRows: rows[0].n,
      empty,
      steady,
      steadyMedianRatio: Math.round((steady.medianMs / empty.medianMs) * 10) / 10,
      replanAll,
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } finally {
    await pool.end();
    await server.withClient((client) => client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)).catch(() => undefined);
    await server.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
