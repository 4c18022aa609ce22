'use strict';
/**
 * The Python SDK (sdk/python) in the benchmark: its worker (`AsyncWorker` with a coroutine
 * no-op handler, or with `api: 'sync'` the sync `Worker` with a plain handler in its threads)
 * and its batch enqueue (`AsyncQueue.enqueue_many`), each in a Python process of its own
 * (python/bench_process.py) driven over stdin/stdout by this adapter. Install and preload use
 * the TypeScript core (same SQL functions). The Python process's CPU time and peak RSS are read
 * from /proc and reported as the worker's (the Node process around it only relays counts).
 */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { createInterface } = require('node:readline');
const core = require('./workhorse');

const ROOT = path.join(__dirname, '..', '..', '..');
const SCRIPT = path.join(__dirname, '..', 'python', 'bench_process.py');
const VENV_PYTHON = path.join(ROOT, 'sdk', 'python', '.venv', 'bin', 'python');

function python() {
  return fs.existsSync(VENV_PYTHON) ? VENV_PYTHON : 'python3';
}

function env() {
  return { ...process.env, PYTHONPATH: path.join(ROOT, 'sdk', 'python', 'src') };
}

/** CPU seconds (user, system) of a process, from /proc/PID/stat (clock ticks of 1/100 s). */
function cpuOf(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return { userMs: Number(fields[11]) * 10, systemMs: Number(fields[12]) * 10 };
}

function peakRssOf(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmHWM:\s+(\d+) kB/m);
  return m ? Number(m[1]) * 1024 : null;
}

/** Starts bench_process.py; `lines` is an async iterator of its JSON output lines. */
function startProcess(args) {
  const child = spawn(python(), [SCRIPT, ...args], { env: env(), stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`python process ended: ${stderr}`);
    return JSON.parse(value);
  };
  return { child, next, exited, stderr: () => stderr };
}

module.exports = {
  schema: 'workhorse',
  version() {
    const r = spawnSync(python(), ['-c', 'import sys, psycopg; print(sys.version.split()[0], psycopg.__version__)'], { env: env(), encoding: 'utf8' });
    return r.status === 0 ? `python ${r.stdout.trim().replace(' ', ', psycopg ')}` : 'unavailable';
  },
  available() {
    const r = spawnSync(python(), ['-c', 'import workhorse.aio'], { env: env(), encoding: 'utf8' });
    return r.status === 0 ? { ok: true } : { ok: false, reason: `the Python SDK does not import (${python()}): run .ci/run's pip step. ${r.stderr}` };
  },
  install: core.install,
  preload: core.preload,
  pendingSql: core.pendingSql,

  async startWorker({ url, concurrency, onJob, onError, options = {} }) {
    const args = ['worker', url, String(concurrency), options.api ?? 'async'];
    if (process.env.BENCH_PYTHON_PROFILE) args.push(process.env.BENCH_PYTHON_PROFILE);
    const p = startProcess(args);
    const started = await p.next();
    if (started.event !== 'started') throw new Error(`unexpected ${JSON.stringify(started)}`);
    let handled = 0;
    const reading = (async () => {
      for (;;) {
        const message = await p.next().catch(() => null);
        if (message === null || message.event === 'stopped') return;
        for (; handled < message.handled; handled++) onJob(undefined);
      }
    })();
    p.child.on('error', (error) => onError(error.message));
    return {
      cpu: () => cpuOf(p.child.pid),
      rssPeakBytes: () => peakRssOf(p.child.pid),
      async stop() {
        p.child.stdin.write('stop\n');
        await reading;
        await p.exited;
      },
    };
  },

  async producer({ url, poolMax }) {
    const p = startProcess(['producer', url, String(poolMax)]);
    await p.next();
    let next = 0;
    return {
      enqueue() {
        throw new Error('the Python producer is measured with batches only');
      },
      async enqueueBatch(payloads) {
        p.child.stdin.write(`${JSON.stringify({ from: next, to: next + payloads.length })}\n`);
        next += payloads.length;
        await p.next();
      },
      cpu: () => cpuOf(p.child.pid),
      async close() {
        p.child.stdin.write('stop\n');
        await p.exited;
      },
    };
  },
};
