'use strict';
/**
 * The Go side of the benchmark (test/bench/go, a Go module of its own: the Go SDK through a
 * replace directive, and River): built once per run into a temporary directory with the
 * machine's `go`, then run as worker and producer processes (lib/process-system.js).
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { processProducer, processWorker } = require('./process-system');

const MODULE = path.join(__dirname, '..', 'go');
let built = null;

/** The bench binary, built on first use: { ok, file } or { ok: false, reason }. */
function binary() {
  if (built) return built;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'workhorse-bench-go-'));
  const file = path.join(dir, 'bench');
  const r = spawnSync('go', ['build', '-o', file, '.'], { cwd: MODULE, encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    built = { ok: false, reason: `go build in test/bench/go failed: ${r.error ? r.error.message : r.stderr}` };
  } else {
    built = { ok: true, file };
    process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
  }
  return built;
}

function command(args) {
  const b = binary();
  if (!b.ok) throw new Error(b.reason);
  return { file: b.file, args };
}

/** Runs the bench binary to completion (migrations, preloads). */
function runToEnd(args) {
  const r = spawnSync(command(args).file, args, { encoding: 'utf8' });
  if (r.error || r.status !== 0) throw new Error(`bench ${args[0]} ${args[1]}: ${r.error ? r.error.message : r.stderr}`);
}

/** The version of a module the Go bench requires, from test/bench/go/go.mod. */
function moduleVersion(module) {
  const m = fs.readFileSync(path.join(MODULE, 'go.mod'), 'utf8').match(new RegExp(`^\\s*${module.replace(/\./g, '\\.')} (v\\S+)`, 'm'));
  const go = spawnSync('go', ['env', 'GOVERSION'], { encoding: 'utf8' });
  return `${m ? m[1] : 'unknown'} (${go.status === 0 ? go.stdout.trim() : 'go unavailable'})`;
}

/** startWorker and producer of one system of the bench binary. */
function goSystem(system) {
  return {
    available: () => {
      const b = binary();
      return b.ok ? { ok: true } : b;
    },
    startWorker({ url, concurrency, onJob, onError, options = {} }) {
      return processWorker(command(['worker', system, url, String(concurrency), JSON.stringify(options)]), { onJob, onError });
    },
    producer({ url, poolMax }) {
      return processProducer(command(['producer', system, url, String(poolMax)]));
    },
  };
}

module.exports = { goSystem, runToEnd, moduleVersion };
