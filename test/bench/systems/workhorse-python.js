'use strict';
/**
 * The Python SDK (sdk/python) in the benchmark: its worker (`AsyncWorker` with a coroutine
 * no-op handler, or with `api: 'sync'` the sync `Worker` with a plain handler in its threads)
 * and its batch enqueue (`AsyncQueue.enqueue_many`), each in a Python process of its own
 * (python/bench_process.py, driven as lib/process-system.js says). Install and preload use the
 * TypeScript core (same SQL functions).
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { processProducer, processWorker } = require('../lib/process-system');
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

function command(args) {
  return { file: python(), args: [SCRIPT, ...args], env: env() };
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

  startWorker({ url, concurrency, onJob, onError, options = {} }) {
    const args = ['worker', url, String(concurrency), options.api ?? 'async'];
    if (process.env.BENCH_PYTHON_PROFILE) args.push(process.env.BENCH_PYTHON_PROFILE);
    return processWorker(command(args), { onJob, onError });
  },

  producer({ url, poolMax }) {
    return processProducer(command(['producer', url, String(poolMax)]));
  },
};
