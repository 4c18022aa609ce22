#!/usr/bin/env node
'use strict';
/**
 * The benchmark of nestjs-workhorse against graphile-worker and pg-boss: `npm run bench`
 * (full, about 11 minutes on 2 cores, sized to stay within 15) or `npm run bench -- --quick`
 * (about 2 minutes).
 *
 * It starts its own PostgreSQL (the test harness's embedded server, with durability on) or
 * uses BENCH_DATABASE_URL (a superuser URL), gives every run a fresh database, runs each
 * worker and producer in a child process of its own, repeats every case in rotated order,
 * and writes docs/benchmarks/results.{md,json} and drain.svg. See docs/benchmarks/README.md.
 *
 * Options:
 *   --quick              small sizes, one concurrency, one repetition
 *   --reps N             repetitions of every case (default 3, quick 1)
 *   --only a,b           groups to run: pgbench, enqueue, latency, drain, history, rss, diagnose,
 *                        limited (our worker draining a queue with a flow-control policy),
 *                        orchestration
 *   --out DIR            where to write the results (default docs/benchmarks)
 *   --drain-jobs N       jobs per drain at concurrency 10 and 50, and of the history drain
 *                        (default: sized by the calibration drain, at most 20000)
 *   --history-jobs N     terminal jobs for the history case (default 1000000)
 *   --rss-jobs N         jobs of the RSS-over-time drain (default: calibrated, at most 200000)
 *   --systems a,b        only these systems (ids of lib/config.js) in the enqueue, latency and
 *                        drain groups, e.g. workhorse,workhorse-python for a quick look at one
 *   --concurrencies a,b  drain at these concurrencies (every listed system runs at each)
 *   --nice N             run the benchmark (server and children inherit it) at this nice
 *                        value, e.g. -5 on a shared machine (lower needs root); default unchanged
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { performance } = require('node:perf_hooks');

const { SYSTEMS, FULL, QUICK, sizesFromRate } = require('./lib/config');
const { startServer } = require('./lib/server');
const { transpileLib, ROOT } = require('./lib/transpile');
const { startChild, killAll } = require('./lib/children');
const { machineInfo, machineCpu, waitForQuiet } = require('./lib/machine');
const { preparePgbench, runPgbench, pgbenchVersion } = require('./lib/pgbench');
const { generateHistory } = require('./lib/history');
const { percentile, summary, rotate } = require('./lib/stats');
const { diagnose, enableStatements, resetStatements, readStatements } = require('./lib/diagnose');
const { writeReports } = require('./lib/report');

const GROUPS = ['pgbench', 'enqueue', 'latency', 'drain', 'history', 'rss', 'diagnose', 'limited', 'orchestration'];

function parseArgs(argv) {
  const args = { quick: false, only: null, reps: null, out: null, overrides: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--quick') args.quick = true;
    else if (a === '--reps') args.reps = Number(value());
    else if (a === '--only') args.only = value().split(',').map((s) => s.trim());
    else if (a === '--out') args.out = path.resolve(value());
    else if (a === '--drain-jobs') args.overrides.drainJobs = Number(value());
    else if (a === '--history-jobs') args.overrides.historyJobs = Number(value());
    else if (a === '--rss-jobs') args.overrides.rssJobs = Number(value());
    else if (a === '--nice') args.nice = Number(value());
    else if (a === '--systems') args.systems = value().split(',').map((x) => x.trim());
    else if (a === '--concurrencies') args.concurrencies = value().split(',').map(Number);
    else if (a === '--help' || a === '-h') {
      process.stdout.write(fs.readFileSync(__filename, 'utf8').split('*/')[0].split('\n').slice(3).map((l) => l.replace(/^ \*? ?/, '')).join('\n'));
      process.exit(0);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  for (const g of args.only ?? []) if (!GROUPS.includes(g)) throw new Error(`unknown group ${g}; groups: ${GROUPS.join(', ')}`);
  return args;
}

const t0 = performance.now();
function log(message) {
  const s = ((performance.now() - t0) / 1000).toFixed(0).padStart(4);
  process.stderr.write(`[bench ${s}s] ${message}\n`);
}

// ---- cleanup: children, databases, server, temporary files, whatever happens ----------------

const cleanups = [];
let cleaning = null;
let interrupted = false;
function cleanup() {
  cleaning ??= (async () => {
    killAll();
    for (const fn of cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch (error) {
        process.stderr.write(`cleanup: ${error.message}\n`);
      }
    }
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    interrupted = true;
    process.stderr.write(`\n${signal}: stopping children and the server\n`);
    cleanup().finally(() => process.exit(130));
  });
}
process.on('uncaughtException', (error) => {
  process.stderr.write(`uncaught: ${error.stack}\n`);
  cleanup().finally(() => process.exit(1));
});
process.on('unhandledRejection', (error) => {
  process.stderr.write(`unhandled rejection: ${error && error.stack}\n`);
  cleanup().finally(() => process.exit(1));
});

// ---- measurement helpers ----------------------------------------------------------------------

let server;
let libDir;
let dbCounter = 0;

async function schemaBytes(database, schema) {
  return server.withClient(async (c) => {
    const { rows } = await c.query(
      `SELECT coalesce(sum(pg_total_relation_size(cl.oid)), 0)::bigint AS bytes
         FROM pg_class cl JOIN pg_namespace n ON n.oid = cl.relnamespace
        WHERE n.nspname = $1 AND cl.relkind IN ('r', 'm')`,
      [schema],
    );
    return Number(rows[0].bytes);
  }, database);
}

async function walLsn() {
  return server.withClient(async (c) => (await c.query('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn);
}

async function walDiff(from, to) {
  return server.withClient(async (c) => Number((await c.query('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn) AS d', [to, from])).rows[0].d));
}

async function checkpoint(database) {
  await server.withClient((c) => c.query('CHECKPOINT'), database).catch(() => undefined);
}

/** A fresh database with the system's schema installed; dropped by `drop()`. */
async function freshDatabase(systemId, purpose) {
  const name = `bench_${purpose}_${systemId.replace(/[^a-z0-9]/g, '_')}_${++dbCounter}`;
  const url = await server.createDatabase(name);
  let dropped = null;
  const drop = () => {
    dropped ??= (async () => {
      const i = cleanups.indexOf(drop);
      if (i >= 0) cleanups.splice(i, 1);
      await server.dropDatabase(name);
    })();
    return dropped;
  };
  cleanups.push(drop);
  try {
    await system(systemId).install({ libDir, url });
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
  return { name, url, drop };
}

function system(id) {
  return require(path.join(__dirname, 'systems', `${SYSTEMS[id].adapter}.js`));
}

/** Window measurements around a measured phase: WAL, server CPU, machine CPU. */
async function openWindow() {
  const quiet = await waitForQuiet();
  return { lsn: await walLsn(), serverCpu: server.cpuSeconds(), machine: machineCpu(), at: performance.now(), quiet };
}

async function closeWindow(w, ownCpuSeconds) {
  const lsn = await walLsn();
  const serverCpu = server.cpuSeconds();
  const machine = machineCpu();
  const seconds = (performance.now() - w.at) / 1000;
  const serverCpuSeconds = serverCpu !== null && w.serverCpu !== null ? serverCpu - w.serverCpu : null;
  const machineBusy = machine && w.machine ? machine.busy - w.machine.busy : null;
  return {
    walBytes: await walDiff(w.lsn, lsn),
    serverCpuSeconds,
    // CPU used by everything else on the machine meanwhile, in cores (0 = nothing else ran).
    backgroundCores:
      machineBusy !== null && serverCpuSeconds !== null ? Math.max(0, (machineBusy - serverCpuSeconds - ownCpuSeconds) / seconds) : null,
    busyCoresBefore: w.quiet.busyCores,
  };
}

// ---- groups ------------------------------------------------------------------------------------

async function groupPgbench(cfg, results) {
  const name = `bench_pgbench_${++dbCounter}`;
  const url = await server.createDatabase(name);
  cleanups.push(() => server.dropDatabase(name));
  const script = await preparePgbench(server, name);
  cleanups.push(script.remove);
  const runs = [];
  for (let rep = 0; rep < cfg.reps; rep++) {
    for (const clients of rotate(cfg.pgbench.clients, rep)) {
      await server.withClient((c) => c.query('TRUNCATE t'), name);
      await checkpoint(name);
      await waitForQuiet();
      const r = await runPgbench({ url, file: script.file, clients, seconds: cfg.pgbench.seconds });
      runs.push({ rep, clients, ...r });
      log(`pgbench -c ${clients}: ${r.tps.toFixed(0)} tps`);
    }
  }
  await server.dropDatabase(name);
  results.pgbench = {
    script: 'INSERT INTO t (v) VALUES (1);',
    seconds: cfg.pgbench.seconds,
    runs,
    summary: Object.fromEntries(cfg.pgbench.clients.map((c) => [c, summary(runs.filter((r) => r.clients === c).map((r) => r.tps))])),
  };
}

async function runProducer(systemId, mode, params, rep, { database, beforeGo, traceQueries, captureNotices } = {}) {
  const db = database ?? (await freshDatabase(systemId, 'enq'));
  try {
    const size0 = await schemaBytes(db.name, system(systemId).schema);
    await checkpoint(db.name);
    const child = startChild(
      { mode, adapter: SYSTEMS[systemId].adapter, libDir, url: db.url, options: SYSTEMS[systemId].options, traceQueries, captureNotices, ...params },
      { label: `${systemId} ${mode}` },
    );
    await child.next('ready', 60_000);
    if (beforeGo) await beforeGo();
    const w = await openWindow();
    child.send({ type: 'go' });
    const { result } = await child.next('done', 300_000);
    const win = await closeWindow(w, (result.cpuUserMs + result.cpuSystemMs) / 1000);
    const size1 = await schemaBytes(db.name, system(systemId).schema);
    await child.finish();
    const jobs = params.jobs;
    return {
      system: systemId,
      mode,
      rep,
      jobs,
      elapsedMs: result.elapsedMs,
      rate: (jobs / result.elapsedMs) * 1000,
      walBytesPerJob: win.walBytes / jobs,
      bytesPerJob: (size1 - size0) / jobs,
      producerCpuMsPerJob: (result.cpuUserMs + result.cpuSystemMs) / jobs,
      serverCpuMsPerJob: win.serverCpuSeconds === null ? null : (win.serverCpuSeconds * 1000) / jobs,
      backgroundCores: win.backgroundCores,
      queries: result.queries,
      notices: result.notices,
      errors: result.errors,
    };
  } finally {
    if (!database) await db.drop();
  }
}

async function groupEnqueue(cfg, results) {
  const e = cfg.enqueue;
  const runs = [];
  const modes = [
    { mode: 'single', params: { jobs: e.singleJobs, producers: e.producers, poolMax: 10 } },
    { mode: 'batch', params: { jobs: e.batchJobs, batchSize: e.batchSize, poolMax: 2 } },
  ];
  for (let rep = 0; rep < cfg.reps; rep++) {
    for (const { mode, params } of modes) {
      const here = e.systems.filter((s) => available(s) && (mode === 'batch' || !(e.batchOnly ?? []).includes(s)));
      for (const [order, systemId] of rotate(here, rep).entries()) {
        try {
          const r = await runProducer(systemId, mode, params, rep);
          r.order = order;
          runs.push(r);
          log(`enqueue ${mode} ${systemId}: ${r.rate.toFixed(0)} jobs/s`);
        } catch (error) {
          runs.push({ system: systemId, mode, rep, error: error.message });
          log(`enqueue ${mode} ${systemId}: FAILED ${error.message.split('\n')[0]}`);
        }
      }
    }
  }
  results.enqueue = { config: e, runs };
}

async function runLatency(systemId, l, rep) {
  const db = await freshDatabase(systemId, 'lat');
  const spec = { adapter: SYSTEMS[systemId].adapter, libDir, url: db.url, options: SYSTEMS[systemId].options };
  let worker;
  let producer;
  try {
    await checkpoint(db.name);
    worker = startChild(
      { ...spec, mode: 'latency-worker', concurrency: l.concurrencyOverride?.[systemId] ?? l.concurrency, traceNotifications: true },
      { label: `${systemId} latency worker` },
    );
    // The producer enqueues with the core client for both of our variants (same SQL call).
    const producerAdapter = systemId === 'workhorse-nest' ? 'workhorse' : spec.adapter;
    producer = startChild(
      { ...spec, adapter: producerAdapter, mode: 'rate', rate: l.rate, durationMs: l.seconds * 1000, poolMax: 4 },
      { label: `${systemId} latency producer` },
    );
    await Promise.all([worker.next('ready', 60_000), producer.next('ready', 60_000)]);
    worker.send({ type: 'go' });
    await worker.next('started', 60_000);
    // Let the worker go idle (initial claims done, poll back-off begun) before the load starts.
    await new Promise((r) => setTimeout(r, 1500));
    const w = await openWindow();
    worker.send({ type: 'mark' });
    producer.send({ type: 'go' });
    const { result: produced } = await producer.next('done', (l.seconds + 60) * 1000);
    worker.send({ type: 'collect', expected: Object.keys(produced.acks).length, timeoutMs: 5000 });
    const { result: seen } = await worker.next('done', 30_000);
    const win = await closeWindow(w, (produced.cpuUserMs + produced.cpuSystemMs + seen.cpuMs) / 1000);
    await Promise.all([worker.finish(), producer.finish()]);
    const latencies = [];
    // Where the latency goes: commit acknowledged -> LISTEN notification in the worker process
    // -> handler start. Each job is matched with the first notification after its commit.
    const notifications = [...(seen.notifications ?? [])].sort((a, b) => a - b);
    const toNotify = [];
    const notifyToStart = [];
    let withoutNotification = 0;
    let missing = 0;
    for (const [i, ack] of Object.entries(produced.acks)) {
      const start = seen.starts[i];
      if (start === undefined) {
        missing++;
        continue;
      }
      latencies.push(start - ack);
      const n = notifications.find((t) => t >= ack - 2 && t <= start);
      if (n === undefined) withoutNotification++;
      else {
        toNotify.push(n - ack);
        notifyToStart.push(start - n);
      }
    }
    return {
      system: systemId,
      rep,
      sent: produced.sent,
      acked: Object.keys(produced.acks).length,
      started: latencies.length,
      missing,
      p50: percentile(latencies, 50),
      p95: percentile(latencies, 95),
      p99: percentile(latencies, 99),
      max: latencies.length ? Math.max(...latencies) : null,
      min: latencies.length ? Math.min(...latencies) : null,
      mean: latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null,
      notifications: notifications.length,
      startedWithoutNotification: withoutNotification,
      commitToNotificationP50: percentile(toNotify, 50),
      notificationToStartP50: percentile(notifyToStart, 50),
      notificationToStartP99: percentile(notifyToStart, 99),
      workerRssPeakBytes: seen.rssPeakBytes,
      backgroundCores: win.backgroundCores,
      errors: [...produced.errors, ...seen.errors],
    };
  } finally {
    if (worker) await worker.kill();
    if (producer) await producer.kill();
    await db.drop();
  }
}

async function groupLatency(cfg, results) {
  const l = cfg.latency;
  const runs = [];
  for (let rep = 0; rep < cfg.reps; rep++) {
    for (const [order, systemId] of rotate(l.systems.filter(available), rep).entries()) {
      try {
        const r = await runLatency(systemId, l, rep);
        r.order = order;
        runs.push(r);
        log(`latency ${systemId}: p50 ${r.p50?.toFixed(2)} ms, p99 ${r.p99?.toFixed(2)} ms, max ${r.max?.toFixed(1)} ms (${r.missing} missing)`);
      } catch (error) {
        runs.push({ system: systemId, rep, error: error.message });
        log(`latency ${systemId}: FAILED ${error.message.split('\n')[0]}`);
      }
    }
  }
  results.latency = { config: l, runs };
}

/**
 * One drain: preload `jobs` no-op jobs (into a fresh database unless `database` is given),
 * VACUUM ANALYZE and CHECKPOINT, then one worker child runs them all.
 */
async function runDrain({ systemId, concurrency, jobs, rep, capMs, database, keepSamples, sampleMs, execArgv, traceQueries, captureNotices, beforeGo, onRunning, options, shape }) {
  const sys = system(systemId);
  const db = database ?? (await freshDatabase(systemId, 'drain'));
  try {
    const size0 = await schemaBytes(db.name, sys.schema);
    await sys.preload({ libDir, url: db.url, count: jobs, parallel: 2, shape });
    await server.withClient((c) => c.query('VACUUM ANALYZE'), db.name);
    await checkpoint(db.name);
    const size1 = await schemaBytes(db.name, sys.schema);
    const child = startChild(
      {
        mode: 'drain',
        adapter: SYSTEMS[systemId].adapter,
        libDir,
        url: db.url,
        concurrency,
        jobs,
        options: { ...SYSTEMS[systemId].options, ...options },
        capMs,
        keepSamples,
        sampleMs,
        traceQueries,
        captureNotices,
      },
      { label: `${systemId} drain`, execArgv },
    );
    await child.next('ready', 60_000);
    if (beforeGo) await beforeGo();
    const w = await openWindow();
    child.send({ type: 'go' });
    const running = onRunning ? onRunning() : null;
    const { result } = await child.next('done', capMs + 120_000);
    const win = await closeWindow(w, (result.cpuUserMs + result.cpuSystemMs) / 1000);
    const size2 = await schemaBytes(db.name, sys.schema);
    const diagnostics = running ? await running : undefined;
    await child.finish();
    const done = result.completed;
    return {
      system: systemId,
      concurrency,
      rep,
      jobs,
      completed: done,
      capped: result.capped,
      elapsedMs: result.elapsedMs,
      rate: (done / result.elapsedMs) * 1000,
      startupMs: result.startupMs,
      walBytesPerJob: done ? win.walBytes / done : null,
      bytesQueuedPerJob: (size1 - size0) / jobs,
      bytesAfterPerJob: (size2 - size0) / jobs,
      workerCpuMsPerJob: done ? (result.cpuUserMs + result.cpuSystemMs) / done : null,
      serverCpuMsPerJob: done && win.serverCpuSeconds !== null ? (win.serverCpuSeconds * 1000) / done : null,
      rssPeakBytes: result.rssPeakBytes,
      rssSamples: result.rssSamples,
      backgroundCores: win.backgroundCores,
      busyCoresBefore: win.busyCoresBefore,
      queries: result.queries,
      notices: result.notices,
      diagnostics,
      errors: result.errors,
    };
  } finally {
    if (!database) await db.drop();
  }
}

const availability = {};
function available(systemId) {
  if (availability[systemId] === undefined) {
    const sys = system(systemId);
    availability[systemId] = sys.available ? sys.available(libDir) : { ok: true };
  }
  return availability[systemId].ok;
}

async function groupDrain(cfg, results) {
  const d = cfg.drain;
  const runs = [];
  for (let rep = 0; rep < cfg.reps; rep++) {
    for (const concurrency of d.concurrencies) {
      const here = d.systems.filter((s) => available(s) && (!d.onlyAt?.[s] || d.onlyAt[s].includes(concurrency)));
      for (const [order, systemId] of rotate(here, rep).entries()) {
        const jobs = d.jobs[concurrency];
        const capMs = systemId === 'pgboss' ? d.pgbossCapMs : d.capMs;
        try {
          const r = await runDrain({ systemId, concurrency, jobs, rep, capMs });
          r.order = order;
          runs.push(r);
          log(
            `drain c=${concurrency} ${systemId}: ${r.rate.toFixed(0)} jobs/s${r.capped ? ` (capped: ${r.completed}/${jobs} in ${(r.elapsedMs / 1000).toFixed(1)} s)` : ''}, RSS ${(r.rssPeakBytes / 1048576).toFixed(0)} MiB, background ${r.backgroundCores?.toFixed(2)} cores`,
          );
        } catch (error) {
          runs.push({ system: systemId, concurrency, rep, error: error.message });
          log(`drain c=${concurrency} ${systemId}: FAILED ${error.message.split('\n')[0]}`);
        }
      }
    }
  }
  results.drain = { config: d, runs };
}

// Orchestration: one parent with 1,000 children (ctx.runChildren) and 1,000 prerequisites with
// one dependent (dependsOn), each against a plain drain of the same 1,001 jobs, in rotated
// order. The rate counts every job from the go to the last one ending (the parent or the
// dependent ends last).
async function groupOrchestration(cfg, results) {
  const runs = [];
  const jobs = 1001;
  for (let rep = 0; rep < cfg.reps; rep++) {
    for (const [order, shape] of rotate(['plain', 'fanout', 'fanin'], rep).entries()) {
      try {
        const r = await runDrain({ systemId: 'workhorse', concurrency: 10, jobs, rep, capMs: 120_000, shape: shape === 'plain' ? undefined : shape });
        runs.push({ shape, rep, order, rate: r.rate, elapsedMs: r.elapsedMs, completed: r.completed, capped: r.capped });
        log(`orchestration ${shape}: ${r.rate.toFixed(0)} jobs/s (${r.completed} jobs in ${(r.elapsedMs / 1000).toFixed(2)} s)`);
      } catch (error) {
        runs.push({ shape, rep, error: error.message });
        log(`orchestration ${shape}: FAILED ${error.message.split('\n')[0]}`);
      }
    }
  }
  results.orchestration = { jobs, concurrency: 10, runs };
}

async function groupHistory(cfg, results) {
  const h = cfg.history;
  log(`history: generating ${h.jobs} terminal jobs`);
  const name = `bench_history_${++dbCounter}`;
  const url = await server.createDatabase(name);
  cleanups.push(() => server.dropDatabase(name));
  await system('workhorse').install({ libDir, url });
  const lsn0 = await walLsn();
  const generation = await generateHistory({ server, database: name, libDir, count: h.jobs, log });
  generation.walBytes = await walDiff(lsn0, await walLsn());
  generation.schemaBytes = await schemaBytes(name, 'workhorse');
  log(`history: ${h.jobs} jobs in ${generation.seconds.toFixed(0)} s, ${(generation.schemaBytes / 1048576).toFixed(0)} MiB`);
  const historyDb = { name, url };
  const runs = [];
  for (let rep = 0; rep < (h.reps ?? cfg.reps); rep++) {
    for (const [order, variant] of rotate(['empty', 'history'], rep).entries()) {
      try {
        const r = await runDrain({
          systemId: 'workhorse',
          concurrency: h.concurrency,
          jobs: h.drainJobs,
          rep,
          capMs: cfg.drain.capMs,
          database: variant === 'history' ? historyDb : undefined,
        });
        r.variant = variant;
        r.order = order;
        runs.push(r);
        log(`history drain (${variant}): ${r.rate.toFixed(0)} jobs/s`);
      } catch (error) {
        runs.push({ system: 'workhorse', variant, rep, error: error.message });
        log(`history drain (${variant}): FAILED ${error.message.split('\n')[0]}`);
      }
    }
  }
  // Not timed against the runs above: one drain per database with pg_stat_statements, to show
  // which statements the history makes slower.
  const diagnosis = {};
  for (const variant of ['empty', 'history']) {
    const db = variant === 'history' ? historyDb : await freshDatabase('workhorse', 'histdiag');
    try {
      await enableStatements(server, db.name);
      const run = await runDrain({
        systemId: 'workhorse',
        concurrency: h.concurrency,
        jobs: h.drainJobs,
        rep: -1,
        capMs: cfg.drain.capMs,
        database: db,
        beforeGo: () => resetStatements(server, db.name),
      });
      diagnosis[variant] = {
        rate: run.rate,
        serverCpuMsPerJob: run.serverCpuMsPerJob,
        statements: await readStatements(server, db.name, run.completed),
      };
    } catch (error) {
      diagnosis[variant] = { error: error.message };
    } finally {
      if (variant === 'empty') await db.drop();
    }
  }
  log(`history diagnosis: instrumented ${diagnosis.empty.rate?.toFixed(0)} vs ${diagnosis.history.rate?.toFixed(0)} jobs/s`);
  await server.dropDatabase(name);
  results.history = { config: h, generation, runs, diagnosis };
}

async function groupRss(cfg, results) {
  const r = cfg.rss;
  log(`rss: draining ${r.jobs} jobs at concurrency ${r.concurrency}`);
  try {
    const run = await runDrain({
      systemId: 'workhorse',
      concurrency: r.concurrency,
      jobs: r.jobs,
      rep: 0,
      capMs: r.capMs,
      keepSamples: true,
      sampleMs: r.sampleMs,
    });
    results.rss = { config: r, run };
    log(`rss: ${run.rate.toFixed(0)} jobs/s, peak ${(run.rssPeakBytes / 1048576).toFixed(0)} MiB`);
  } catch (error) {
    results.rss = { config: r, error: error.message };
    log(`rss: FAILED ${error.message.split('\n')[0]}`);
  }
}

/**
 * Measures our drain rate at concurrency 10 once and sizes the drains from it (config.js,
 * sizesFromRate), so the full run fits its time budget on this machine.
 */
async function calibrate(cfg, args, results) {
  const c = cfg.calibration;
  // Twice: the first drain on a new server also pays for cold caches.
  const runs = [];
  for (let i = 0; i < 2; i++) runs.push(await runDrain({ systemId: 'workhorse', concurrency: c.concurrency, jobs: c.jobs, rep: -1, capMs: 120_000 }));
  const run = runs.reduce((a, b) => (b.rate > a.rate ? b : a));
  const sizes = sizesFromRate(cfg, run.rate);
  const issue = { drainJobs: { ...cfg.drain.jobs }, historyDrainJobs: cfg.history.drainJobs, rssJobs: cfg.rss?.jobs };
  cfg.drain.jobs = sizes.drainJobs;
  cfg.history.drainJobs = sizes.historyDrainJobs;
  if (cfg.rss) cfg.rss.jobs = sizes.rssJobs;
  results.meta.calibration = {
    rate: run.rate,
    rates: runs.map((r) => r.rate),
    jobs: c.jobs,
    backgroundCores: run.backgroundCores,
    sizes,
    issueSizes: issue,
    overridden: args.overrides,
  };
  log(
    `calibration: our drain at c=${c.concurrency} ran ${run.rate.toFixed(0)} jobs/s -> drain jobs ${JSON.stringify(sizes.drainJobs)}, history drain ${sizes.historyDrainJobs}, rss ${sizes.rssJobs}`,
  );
}

async function groupDiagnose(cfg, results) {
  results.diagnose = await diagnose({
    cfg: cfg.diagnose,
    server,
    libDir,
    log,
    systems: SYSTEMS,
    freshDatabase,
    runDrain,
    runProducer,
  });
}

/**
 * Our worker draining one queue under each flow-control policy of the config (none, a policy
 * that never binds, a binding concurrency, a binding rate), in rotated order: what the claim's
 * policy path costs, and that a binding limit holds (the busiest window of the rate case, from
 * the claim events).
 */
async function groupLimited(cfg, results) {
  const l = cfg.limited;
  const runs = [];
  for (let rep = 0; rep < cfg.reps; rep++) {
    for (const [order, policyCase] of rotate(l.cases, rep).entries()) {
      const db = await freshDatabase('workhorse', 'limited');
      try {
        const setPolicy = () =>
          policyCase.policy &&
          server.withClient((c) => c.query("SELECT workhorse.set_queue_policy_v1('default', $1::jsonb)", [JSON.stringify(policyCase.policy)]), db.name);
        const r = await runDrain({
          systemId: 'workhorse', concurrency: l.concurrency, jobs: l.jobs, rep, capMs: l.capMs, database: db, beforeGo: setPolicy, options: l.options,
        });
        const windowMs = policyCase.policy?.rateLimit?.intervalMs ?? 1000;
        r.busiestWindow = await server.withClient(async (c) => {
          const { rows } = await c.query(
            `SELECT coalesce(max(n), 0)::int AS n FROM (
               SELECT count(*) OVER (ORDER BY at RANGE BETWEEN CURRENT ROW AND $1::interval FOLLOWING) AS n
               FROM workhorse.job_event WHERE kind = 'claimed') AS w`,
            [`${windowMs * 1000 - 1} microseconds`],
          );
          return { windowMs, claims: rows[0].n };
        }, db.name);
        Object.assign(r, { case: policyCase.name, policy: policyCase.policy ?? null, order });
        runs.push(r);
        log(`limited ${policyCase.name}: ${r.rate.toFixed(0)} jobs/s, server ${r.serverCpuMsPerJob?.toFixed(3)} ms/job, busiest ${windowMs} ms window ${r.busiestWindow.claims} claims`);
      } catch (error) {
        runs.push({ case: policyCase.name, rep, error: error.message });
        log(`limited ${policyCase.name}: FAILED ${error.message.split('\n')[0]}`);
      } finally {
        await db.drop();
      }
    }
  }
  results.limited = { config: l, runs };
}

// ---- main --------------------------------------------------------------------------------------

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const cfg = structuredClone(args.quick ? QUICK : FULL);
  if (args.reps) cfg.reps = args.reps;
  if (args.overrides.historyJobs) cfg.history.jobs = args.overrides.historyJobs;
  if (args.systems) {
    for (const id of args.systems) if (!SYSTEMS[id]) throw new Error(`unknown system ${id}; systems: ${Object.keys(SYSTEMS).join(', ')}`);
    // Each group keeps the systems it measures at all (the Nest variant and the Python sync
    // worker share their producer with another system, and only drain).
    for (const group of [cfg.enqueue, cfg.latency, cfg.drain]) group.systems = args.systems.filter((id) => group.systems.includes(id));
  }
  if (args.concurrencies) {
    cfg.drain.concurrencies = args.concurrencies;
    cfg.drain.onlyAt = {};
    for (const c of args.concurrencies) cfg.drain.jobs[c] ??= cfg.drain.jobs[10];
  }
  const groups = (args.only ?? GROUPS).filter((g) => g !== 'rss' || cfg.rss);
  const outDir = args.out ?? path.join(ROOT, 'docs', 'benchmarks');

  const startedAt = new Date();
  log(`${cfg.mode} run: ${groups.join(', ')}; ${cfg.reps} repetition(s)`);
  if (args.nice !== undefined) {
    // Set before anything is started: the server, pgbench and every child inherit it.
    os.setPriority(0, args.nice);
    log(`running at nice ${os.getPriority(0)}`);
  }
  const lib = transpileLib();
  libDir = lib.dir;
  cleanups.push(lib.remove);
  server = await startServer({ log });
  cleanups.push(() => server.stop());
  log(`PostgreSQL ${server.version}${server.external ? ' (BENCH_DATABASE_URL)' : ' (embedded)'}`);

  const nest = system('workhorse-nest').available(libDir);
  availability['workhorse-nest'] = nest;
  if (!nest.ok) log(`Nest variant skipped: ${nest.reason}`);

  const results = {
    meta: {
      mode: cfg.mode,
      startedAt: startedAt.toISOString(),
      machine: machineInfo(),
      versions: {
        node: process.version,
        postgres: server.version,
        pgbench: await pgbenchVersion(),
        'nestjs-workhorse': system('workhorse').version(ROOT),
        'graphile-worker': system('graphile').version(),
        'pg-boss': system('pgboss').version(),
        'workhorse (Python SDK)': system('workhorse-python').version(),
        'workhorse (Go SDK)': system('workhorse-go').version(),
        river: system('river').version(),
        pg: require('pg/package.json').version,
        '@nestjs/core': require('@nestjs/core/package.json').version,
      },
      server: { external: server.external, settings: server.settings },
      config: cfg,
      systems: SYSTEMS,
      nest,
      groups,
      nice: os.getPriority(0),
    },
  };

  if (cfg.calibration && groups.some((g) => ['drain', 'history', 'rss'].includes(g))) {
    await calibrate(cfg, args, results);
  }
  if (args.overrides.drainJobs) {
    for (const c of Object.keys(cfg.drain.jobs)) if (Number(c) > 1) cfg.drain.jobs[c] = args.overrides.drainJobs;
    cfg.history.drainJobs = args.overrides.drainJobs;
  }
  if (args.overrides.rssJobs && cfg.rss) cfg.rss.jobs = args.overrides.rssJobs;

  const runners = {
    pgbench: groupPgbench,
    enqueue: groupEnqueue,
    latency: groupLatency,
    drain: groupDrain,
    history: groupHistory,
    rss: groupRss,
    diagnose: groupDiagnose,
    limited: groupLimited,
    orchestration: groupOrchestration,
  };
  for (const group of groups) {
    if (interrupted) return;
    const g0 = performance.now();
    log(`== ${group}`);
    try {
      await runners[group](cfg, results);
    } catch (error) {
      results[group] = { ...(results[group] || {}), error: error.stack };
      log(`${group} FAILED: ${error.stack}`);
    }
    (results.meta.groupSeconds ??= {})[group] = (performance.now() - g0) / 1000;
  }
  // An interrupted run writes nothing: half a run would overwrite the last complete results.
  if (interrupted) return;
  results.meta.finishedAt = new Date().toISOString();
  results.meta.durationSeconds = (performance.now() - t0) / 1000;
  const files = writeReports(results, outDir, cfg.mode === 'quick' ? '-quick' : '');
  log(`wrote ${files.join(', ')} in ${results.meta.durationSeconds.toFixed(0)} s`);
}

main()
  .then(() => cleanup())
  .then(() => process.exit(0))
  .catch(async (error) => {
    process.stderr.write(`bench failed: ${error.stack}\n`);
    await cleanup();
    process.exit(1);
  });
