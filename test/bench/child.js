'use strict';
/**
 * One benchmark process: a worker (drain, latency) or a producer (enqueue, latency load), for
 * one system, started by run.js with `child_process.fork` and driven over IPC:
 *
 *   child -> parent  { type: 'ready' }                   modules loaded, connections open
 *   parent -> child  { type: 'go' }                      start the work now
 *   child -> parent  { type: 'done', result }            the measured part is over
 *   parent -> child  { type: 'stop' }                    shut down cleanly and exit
 *
 * The spec comes as JSON in BENCH_SPEC. A child never outlives its parent: it exits when the
 * IPC channel closes.
 */
const fs = require('node:fs');
const path = require('node:path');
const { performance } = require('node:perf_hooks');
const { Client } = require('pg');
const { setTimeout: sleep } = require('node:timers/promises');

const spec = JSON.parse(process.env.BENCH_SPEC || '{}');
const trace = spec.traceQueries || spec.captureNotices || spec.traceNotifications ? instrumentPg() : null;
const system = require(path.join(__dirname, 'systems', `${spec.adapter}.js`));

/**
 * Diagnosis only. Patches each copy of node-postgres the systems load:
 * - traceQueries: counts every statement and how long the client waited for it (send to
 *   result, so commit, network and queueing included);
 * - captureNotices: keeps the NOTICEs the server sends (auto_explain plans), one per statement
 *   text;
 * - traceNotifications: the wall-clock arrival time of every LISTEN notification.
 */
function instrumentPg() {
  const stats = new Map();
  const notices = new Map();
  const notifications = [];
  const seen = new Set();
  for (const from of [__dirname, path.dirname(require.resolve('graphile-worker')), path.dirname(require.resolve('pg-boss'))]) {
    let pgPath;
    try {
      pgPath = require.resolve('pg', { paths: [from] });
    } catch {
      continue;
    }
    if (seen.has(pgPath)) continue;
    seen.add(pgPath);
    const { Client: PgClient } = require(pgPath);
    if (spec.captureNotices || spec.traceNotifications) {
      const emit = PgClient.prototype.emit;
      PgClient.prototype.emit = function instrumentedEmit(event, message, ...rest) {
        if (event === 'notification' && spec.traceNotifications) notifications.push(wallNow());
        if (event === 'notice' && spec.captureNotices && message && typeof message.message === 'string') {
          // Per statement, the sampled plan whose top node returned the most rows (a claim that
          // found work, not the last empty poll); the harness's own probe is left out.
          const m = message.message.match(/Query Text: ([^\n]{0,200})/);
          const key = m ? m[1] : message.message.slice(0, 80);
          const rows = Number((message.message.match(/actual time=[\d.]+\.\.[\d.]+ rows=([\d.]+)/) || [])[1] ?? 0);
          const kept = notices.get(key);
          if (!key.startsWith('SELECT count(*)::int AS n FROM') && (!kept || rows >= kept.rows)) {
            notices.set(key, { rows, text: message.message.slice(0, 8000) });
          }
        }
        return emit.call(this, event, message, ...rest);
      };
    }
    if (!spec.traceQueries) continue;
    const original = PgClient.prototype.query;
    PgClient.prototype.query = function tracedQuery(config, values, callback) {
      const text = typeof config === 'string' ? config : config && config.text;
      if (typeof text !== 'string' || (config && typeof config.submit === 'function')) {
        return original.call(this, config, values, callback);
      }
      const key = text.replace(/\s+/g, ' ').trim().slice(0, 160);
      const started = performance.now();
      const record = () => {
        const s = stats.get(key) ?? { calls: 0, totalMs: 0, maxMs: 0 };
        const ms = performance.now() - started;
        s.calls++;
        s.totalMs += ms;
        s.maxMs = Math.max(s.maxMs, ms);
        stats.set(key, s);
      };
      if (typeof values === 'function') {
        return original.call(this, config, (err, res) => {
          record();
          values(err, res);
        });
      }
      if (typeof callback === 'function') {
        return original.call(this, config, values, (err, res) => {
          record();
          callback(err, res);
        });
      }
      const result = original.call(this, config, values);
      if (result && typeof result.then === 'function') result.then(record, record);
      return result;
    };
  }
  return {
    reset: () => {
      stats.clear();
      notices.clear();
      notifications.length = 0;
    },
    snapshot: () => [...stats.entries()].map(([query, s]) => ({ query, ...s })).sort((a, b) => b.totalMs - a.totalMs),
    notices: () => [...notices.values()].map((n) => n.text),
    notifications: () => [...notifications],
  };
}
const errors = [];
const onError = (message) => {
  if (errors.length < 20) errors.push(String(message));
};

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
const wallNow = () => performance.timeOrigin + performance.now();

function procStatus() {
  const text = fs.readFileSync('/proc/self/status', 'utf8');
  const kb = (key) => {
    const m = text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) * 1024 : null;
  };
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

function send(message) {
  if (process.send) process.send(message);
}

let resolveMessage = new Map();
function waitFor(type) {
  return new Promise((resolve) => resolveMessage.set(type, resolve));
}
process.on('message', (message) => {
  const resolve = resolveMessage.get(message && message.type);
  if (resolve) {
    resolveMessage.delete(message.type);
    resolve(message);
  }
});
process.on('disconnect', () => process.exit(3));

async function monitorClient() {
  const client = new Client({ connectionString: spec.url });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Preloaded jobs are run by one worker until the database has none left (or the cap). */
async function drain() {
  const monitor = await monitorClient();
  let handled = 0;
  let firstAt = null;
  let lastAt = null;
  let allHandled;
  const handledAll = new Promise((resolve) => {
    allHandled = resolve;
  });
  const onJob = () => {
    const now = performance.now();
    if (firstAt === null) firstAt = now;
    lastAt = now;
    handled++;
    if (handled >= spec.jobs) allHandled();
  };
  const samples = [];
  send({ type: 'ready' });
  await waitFor('go');
  const goAt = performance.now();
  const cpu0 = process.cpuUsage();
  if (trace) trace.reset();
  const sampler = setInterval(() => {
    samples.push({ t: Math.round(performance.now() - goAt), rss: procStatus().rss, handled });
  }, spec.sampleMs || 250);
  const worker = await system.startWorker({
    libDir: spec.libDir,
    url: spec.url,
    concurrency: spec.concurrency,
    options: spec.options,
    onJob,
    onError,
  });
  const startedAt = performance.now();
  const capMs = spec.capMs || 120_000;
  let capped = false;
  const capTimer = new Promise((resolve) => {
    setTimeout(() => {
      capped = true;
      resolve();
    }, capMs).unref();
  });
  await Promise.race([handledAll, capTimer]);
  // Handler calls are not completions: the database decides when the drain is over.
  let pending = null;
  for (;;) {
    pending = (await monitor.query(system.pendingSql)).rows[0].n;
    if (pending === 0 || capped) break;
    await sleep(5);
    if (performance.now() - startedAt > capMs) capped = true;
  }
  const endAt = performance.now();
  const cpu = process.cpuUsage(cpu0);
  // A worker in another process (the Python SDK's) reports its own CPU time and peak memory.
  const own = worker.cpu ? worker.cpu() : { userMs: 0, systemMs: 0 };
  clearInterval(sampler);
  const status = procStatus();
  const completed = spec.jobs - pending;
  send({
    type: 'done',
    result: {
      jobs: spec.jobs,
      completed,
      capped: pending !== 0,
      handled,
      // From the first handler call to the moment the database held no unfinished job.
      elapsedMs: endAt - (firstAt ?? startedAt),
      startupMs: (firstAt ?? startedAt) - goAt,
      lastHandlerToDoneMs: lastAt === null ? null : endAt - lastAt,
      cpuUserMs: cpu.user / 1000 + own.userMs,
      cpuSystemMs: cpu.system / 1000 + own.systemMs,
      rssPeakBytes: worker.rssPeakBytes ? worker.rssPeakBytes() : status.hwm,
      rssEndBytes: status.rss,
      rssSamples: spec.keepSamples ? samples : undefined,
      rssSampledMaxBytes: samples.reduce((m, s) => Math.max(m, s.rss), status.rss),
      queries: trace ? trace.snapshot() : undefined,
      notices: trace && spec.captureNotices ? trace.notices() : undefined,
      errors,
    },
  });
  await waitFor('stop');
  await worker.stop();
  await monitor.end();
}

/** An idle worker that records when each job's handler starts (wall clock, by payload.i). */
async function latencyWorker() {
  const starts = {};
  send({ type: 'ready' });
  await waitFor('go');
  const worker = await system.startWorker({
    libDir: spec.libDir,
    url: spec.url,
    concurrency: spec.concurrency,
    options: spec.options,
    onJob: (payload) => {
      if (payload && starts[payload.i] === undefined) starts[payload.i] = wallNow();
    },
    onError,
  });
  send({ type: 'started' });
  await waitFor('mark');
  const cpu0 = process.cpuUsage();
  const { expected, timeoutMs } = await waitFor('collect');
  const cpu = process.cpuUsage(cpu0);
  // Stragglers (a poll-bound worker) get until the timeout to start the last jobs.
  const deadline = performance.now() + timeoutMs;
  while (Object.keys(starts).length < expected && performance.now() < deadline) await sleep(20);
  send({
    type: 'done',
    result: {
      starts,
      notifications: trace ? trace.notifications() : undefined,
      cpuMs: (cpu.user + cpu.system) / 1000,
      rssPeakBytes: procStatus().hwm,
      errors,
    },
  });
  await waitFor('stop');
  await worker.stop();
}

/**
 * Producers. `rate`: one job every 1000/rate ms on a fixed schedule (a slow commit never delays
 * the next send), recording when each commit was acknowledged. `single`: `producers` loops,
 * each enqueueing one job per transaction, `jobs` in all. `batch`: batches of `batchSize`, one
 * after another.
 */
async function produce() {
  const producer = await system.producer({ libDir: spec.libDir, url: spec.url, poolMax: spec.poolMax || 4 });
  send({ type: 'ready' });
  await waitFor('go');
  const cpu0 = process.cpuUsage();
  if (trace) trace.reset();
  const t0 = performance.now();
  const result = { errors };
  if (spec.mode === 'rate') {
    const interval = 1000 / spec.rate;
    const total = Math.round((spec.rate * spec.durationMs) / 1000);
    const acks = {};
    const inflight = [];
    for (let i = 0; i < total; i++) {
      const due = t0 + i * interval;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait - 0.5);
      while (performance.now() < due) {
        // spin out the last half millisecond so sends stay on schedule
      }
      inflight.push(
        producer.enqueue({ i }).then(
          () => {
            acks[i] = wallNow();
          },
          (error) => onError(error.message),
        ),
      );
    }
    await Promise.all(inflight);
    result.acks = acks;
    result.sent = total;
  } else if (spec.mode === 'single') {
    let next = 0;
    const lane = async () => {
      while (next < spec.jobs) {
        const i = next++;
        await producer.enqueue({ i });
      }
    };
    await Promise.all(Array.from({ length: spec.producers }, lane));
  } else if (spec.mode === 'batch') {
    for (let from = 0; from < spec.jobs; from += spec.batchSize) {
      const payloads = [];
      for (let i = from; i < Math.min(spec.jobs, from + spec.batchSize); i++) payloads.push({ i });
      await producer.enqueueBatch(payloads);
    }
  }
  result.elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const own = producer.cpu ? producer.cpu() : { userMs: 0, systemMs: 0 };
  result.cpuUserMs = cpu.user / 1000 + own.userMs;
  result.cpuSystemMs = cpu.system / 1000 + own.systemMs;
  result.rssPeakBytes = procStatus().hwm;
  if (trace) result.queries = trace.snapshot();
  if (trace && spec.captureNotices) result.notices = trace.notices();
  send({ type: 'done', result });
  await waitFor('stop');
  await producer.close();
}

const modes = { drain, 'latency-worker': latencyWorker, produce };

modes[spec.mode === 'rate' || spec.mode === 'single' || spec.mode === 'batch' ? 'produce' : spec.mode]()
  .then(() => process.exit(0))
  .catch((error) => {
    send({ type: 'error', message: error && error.stack ? error.stack : String(error) });
    process.exit(1);
  });
