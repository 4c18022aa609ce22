'use strict';
/**
 * Where the time goes. These runs carry instruments and are not compared with the timed runs.
 * Nothing here names our SQL functions: it observes whatever statements the clients send, so it
 * stays true while lib/ and sql/ change.
 *
 * - Per system, a drain with pg_stat_statements tracking every statement (the nested ones inside
 *   SQL functions, and planning) in that database only, and the child's node-postgres calls
 *   counted and timed on the client: round trips per job, client wait against server time.
 * - For our worker, a CPU profile of the worker process (`node --cpu-prof`) in the same run.
 * - For our worker, a drain with auto_explain loaded into the worker's own sessions (ANALYZE,
 *   BUFFERS, nested statements, sampled, sent back as NOTICEs that the child collects): the
 *   plans of the claim/completion statements under real load.
 * - For our worker, drains with `plan_cache_mode = auto` everywhere (function-level settings
 *   removed) against `force_generic_plan` for the database, alternating: how much re-planning
 *   costs the hot path.
 * - For our batch enqueue, the same statement breakdown and the plans of its statements over 1 ms.
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { median } = require('./stats');

async function alterDatabase(server, database, settings) {
  await server.withClient(async (c) => {
    for (const [key, value] of Object.entries(settings)) {
      await c.query(`ALTER DATABASE ${c.escapeIdentifier(database)} SET ${key} = ${value}`);
    }
  }, database);
}

async function enableStatements(server, database) {
  await server.withClient((c) => c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements'), database);
  await alterDatabase(server, database, { 'pg_stat_statements.track': "'all'", 'pg_stat_statements.track_planning': 'on' });
}

/** auto_explain in every new session of the database, its output sent to the client as NOTICEs. */
async function enableAutoExplain(server, database, { minDurationMs = 0, sampleRate = 1 } = {}) {
  await alterDatabase(server, database, {
    session_preload_libraries: "'auto_explain'",
    'auto_explain.log_min_duration': String(minDurationMs),
    'auto_explain.log_analyze': 'on',
    'auto_explain.log_buffers': 'on',
    'auto_explain.log_timing': 'on',
    'auto_explain.log_nested_statements': 'on',
    'auto_explain.sample_rate': String(sampleRate),
    'auto_explain.log_level': 'notice',
    'auto_explain.log_parameter_max_length': '0',
  });
}

async function resetStatements(server, database) {
  await server.withClient((c) => c.query('SELECT pg_stat_statements_reset()'), database);
}

async function readStatements(server, database, jobs) {
  return server.withClient(async (c) => {
    const { rows } = await c.query(
      `SELECT toplevel, calls::bigint AS calls, total_plan_time, total_exec_time, rows::bigint AS rows,
              shared_blks_hit::bigint AS hit, shared_blks_read::bigint AS read, wal_bytes::numeric AS wal_bytes,
              regexp_replace(query, '\\s+', ' ', 'g') AS query
         FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          -- the harness's own probes (sizes, the child's completion check)
          AND query !~ '^(SELECT coalesce\\(sum\\(pg_total_relation_size|SELECT count\\(\\*\\)::int AS n FROM|SELECT pg_stat_statements_reset)'
        ORDER BY total_exec_time + total_plan_time DESC
        LIMIT 14`,
    );
    return rows.map((r) => ({
      toplevel: r.toplevel,
      callsPerJob: Number(r.calls) / jobs,
      calls: Number(r.calls),
      meanPlanMs: Number(r.total_plan_time) / Math.max(1, Number(r.calls)),
      meanExecMs: Number(r.total_exec_time) / Math.max(1, Number(r.calls)),
      totalMsPerJob: (Number(r.total_plan_time) + Number(r.total_exec_time)) / jobs,
      rowsPerCall: Number(r.rows) / Math.max(1, Number(r.calls)),
      blocksPerJob: (Number(r.hit) + Number(r.read)) / jobs,
      walBytesPerJob: Number(r.wal_bytes) / jobs,
      query: r.query.slice(0, 220),
    }));
  }, database);
}

/** Plans that touch tables (scans, inserts, updates, deletes), one per statement text. */
function tablePlans(notices) {
  const byText = new Map();
  for (const n of notices ?? []) {
    if (!/(Seq Scan|Index Scan|Index Only Scan|Bitmap Heap Scan|Insert|Update|Delete) on /.test(n)) continue;
    const text = (n.match(/Query Text: ([^\n]{0,200})/) || [])[1] ?? n.slice(0, 80);
    byText.set(
      text,
      n
        .replace(/^duration: /, '')
        .split('\n')
        .filter((line) => !line.startsWith('Query Parameters:'))
        .join('\n'),
    );
  }
  return [...byText.values()];
}

function clientCalls(queries, jobs) {
  return (queries ?? []).map((q) => ({ query: q.query, callsPerJob: q.calls / jobs, meanClientMs: q.totalMs / q.calls, maxClientMs: q.maxMs }));
}

/** Self time per function and per area from a V8 .cpuprofile. */
function summarizeProfile(file, libDir) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0) || 1;
  const fns = new Map();
  const areas = new Map();
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    const where = url.replace(`file://${libDir}/`, '').replace(/^.*node_modules\//, 'node_modules/');
    const key = `${functionName || '(anonymous)'} ${where ? `${where}:${lineNumber + 1}` : ''}`.trim();
    fns.set(key, (fns.get(key) ?? 0) + us);
    let area;
    if (!url && ['(idle)', '(program)', '(garbage collector)', '(root)'].includes(functionName)) area = functionName;
    else if (/\/node_modules\/pg(-[a-z]+)?\//.test(url)) area = 'node-postgres (pg, pg-protocol, ...)';
    else if (url.includes(libDir)) area = 'nestjs-workhorse lib/';
    else if (url.startsWith('node:') || url === '') area = 'Node.js internals (net, timers, streams, ...)';
    else if (url.includes('/test/bench/')) area = 'benchmark harness';
    else area = 'other dependencies';
    areas.set(area, (areas.get(area) ?? 0) + us);
  }
  const pct = (us) => Math.round((us / total) * 1000) / 10;
  return {
    totalMs: total / 1000,
    areas: [...areas.entries()].sort((a, b) => b[1] - a[1]).map(([area, us]) => ({ area, percent: pct(us), ms: us / 1000 })),
    topFunctions: [...fns.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 15)
      .map(([fn, us]) => ({ fn, percent: pct(us), ms: us / 1000 })),
  };
}

async function statementsDrain({ systemId, cfg, server, libDir, freshDatabase, runDrain, profile }) {
  const db = await freshDatabase(systemId, 'diag');
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'workhorse-bench-prof-'));
  try {
    await enableStatements(server, db.name);
    const run = await runDrain({
      systemId,
      concurrency: cfg.concurrency,
      jobs: cfg.jobs,
      rep: 0,
      capMs: 120_000,
      database: db,
      traceQueries: true,
      execArgv: profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [],
      beforeGo: () => resetStatements(server, db.name),
    });
    const calls = clientCalls(run.queries, run.completed);
    const entry = {
      rate: run.rate,
      jobs: run.completed,
      roundTripsPerJob: calls.reduce((a, q) => a + q.callsPerJob, 0),
      workerCpuMsPerJob: run.workerCpuMsPerJob,
      serverCpuMsPerJob: run.serverCpuMsPerJob,
      walBytesPerJob: run.walBytesPerJob,
      clientCalls: calls.slice(0, 8),
      statements: await readStatements(server, db.name, run.completed),
    };
    const file = fs.readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
    if (file) entry.profile = summarizeProfile(path.join(profileDir, file), libDir);
    return entry;
  } finally {
    fs.rmSync(profileDir, { recursive: true, force: true });
    await db.drop();
  }
}

async function plansUnderLoad({ cfg, server, freshDatabase, runDrain }) {
  const db = await freshDatabase('workhorse', 'diagplan');
  try {
    await enableAutoExplain(server, db.name, { sampleRate: 0.05 });
    const run = await runDrain({ systemId: 'workhorse', concurrency: cfg.concurrency, jobs: cfg.jobs, rep: 0, capMs: 120_000, database: db, captureNotices: true });
    return { rate: run.rate, plans: tablePlans(run.notices) };
  } finally {
    await db.drop();
  }
}

/**
 * Functions can carry their own plan_cache_mode (ours force generic plans on the hot path);
 * for the `auto` side of the experiment every such function-level setting is removed.
 */
async function resetFunctionPlanCacheModes(server, database) {
  await server.withClient(async (c) => {
    const { rows } = await c.query(
      `SELECT p.oid::regprocedure::text AS fn FROM pg_proc p
       WHERE EXISTS (SELECT 1 FROM unnest(p.proconfig) AS s WHERE s LIKE 'plan_cache_mode=%')`,
    );
    for (const { fn } of rows) await c.query(`ALTER FUNCTION ${fn} RESET plan_cache_mode`);
  }, database);
}

async function planCacheExperiment({ cfg, server, freshDatabase, runDrain }) {
  const modes = ['auto', 'force_generic_plan'];
  const rates = { auto: [], force_generic_plan: [] };
  for (let round = 0; round < cfg.planCacheRounds; round++) {
    for (const mode of round % 2 ? [...modes].reverse() : modes) {
      const db = await freshDatabase('workhorse', 'diagpcm');
      try {
        if (mode === 'auto') await resetFunctionPlanCacheModes(server, db.name);
        else await alterDatabase(server, db.name, { plan_cache_mode: mode });
        const run = await runDrain({ systemId: 'workhorse', concurrency: cfg.concurrency, jobs: cfg.jobs, rep: round, capMs: 120_000, database: db });
        rates[mode].push(run.rate);
      } finally {
        await db.drop();
      }
    }
  }
  return Object.fromEntries(modes.map((m) => [m, { rates: rates[m], median: median(rates[m]) }]));
}

async function enqueueBreakdown({ cfg, server, freshDatabase, runProducer }) {
  const jobs = cfg.enqueueJobs;
  const db = await freshDatabase('workhorse', 'diagenq');
  let run;
  let statements;
  try {
    await enableStatements(server, db.name);
    run = await runProducer('workhorse', 'batch', { jobs, batchSize: 1000, poolMax: 2 }, 0, {
      database: db,
      traceQueries: true,
      beforeGo: () => resetStatements(server, db.name),
    });
    statements = await readStatements(server, db.name, jobs);
  } finally {
    await db.drop();
  }
  const db2 = await freshDatabase('workhorse', 'diagenqplan');
  let plans;
  try {
    await enableAutoExplain(server, db2.name, { minDurationMs: 1 });
    const explained = await runProducer('workhorse', 'batch', { jobs: 2000, batchSize: 1000, poolMax: 2 }, 0, { database: db2, captureNotices: true });
    plans = tablePlans(explained.notices);
  } finally {
    await db2.drop();
  }
  return {
    rate: run.rate,
    jobs,
    serverCpuMsPerJob: run.serverCpuMsPerJob,
    producerCpuMsPerJob: run.producerCpuMsPerJob,
    clientCalls: clientCalls(run.queries, jobs).slice(0, 5),
    statements,
    plans,
  };
}

async function step(out, key, log, fn) {
  try {
    out[key] = await fn();
  } catch (error) {
    out[key] = { error: error.stack };
    log(`diagnose ${key}: FAILED ${error.message.split('\n')[0]}`);
  }
}

async function diagnose(ctx) {
  const { cfg, systems, log } = ctx;
  const out = { config: cfg, systems: {} };
  for (const systemId of cfg.systems) {
    await step(out.systems, systemId, log, async () => {
      const entry = await statementsDrain({ ...ctx, systemId, profile: systemId === 'workhorse' });
      entry.label = systems[systemId].label;
      log(`diagnose ${systemId}: ${entry.rate.toFixed(0)} jobs/s with instruments, ${entry.roundTripsPerJob.toFixed(2)} round trips/job`);
      return entry;
    });
  }
  await step(out, 'plans', log, async () => {
    const r = await plansUnderLoad(ctx);
    log(`diagnose plans: ${r.plans.length} plans captured`);
    return r;
  });
  await step(out, 'planCache', log, async () => {
    const r = await planCacheExperiment(ctx);
    log(`diagnose plan_cache_mode: ${Object.entries(r).map(([m, v]) => `${m} ${v.median?.toFixed(0)} jobs/s`).join(', ')}`);
    return r;
  });
  await step(out, 'enqueue', log, async () => {
    const r = await enqueueBreakdown(ctx);
    log(`diagnose enqueue: ${r.rate.toFixed(0)} jobs/s with instruments`);
    return r;
  });
  return out;
}

module.exports = { diagnose, summarizeProfile, enableStatements, resetStatements, readStatements };
