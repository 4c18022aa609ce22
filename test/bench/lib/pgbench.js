'use strict';
/**
 * The physical reference: pgbench running single-row INSERT transactions on the same server,
 * `INSERT INTO t (v) VALUES (1)` with autocommit, so each transaction is one WAL flush. It is
 * the most a client can commit per second here; every queue figure is also shown against it.
 */
const { execFile } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const PGBENCH = process.env.BENCH_PGBENCH || '/usr/bin/pgbench';
const SCRIPT = 'INSERT INTO t (v) VALUES (1);\n';

function pgbenchVersion() {
  return new Promise((resolve) => {
    execFile(PGBENCH, ['--version'], (error, stdout) => resolve(error ? null : stdout.trim()));
  });
}

/** Creates the table; returns the path of the script file (removed by the caller's cleanup). */
async function preparePgbench(server, database) {
  await server.withClient((c) => c.query('CREATE TABLE t (v integer)'), database);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'workhorse-bench-pgbench-'));
  const file = path.join(dir, 'insert.sql');
  fs.writeFileSync(file, SCRIPT);
  return { file, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Runs pgbench with `clients` connections for `seconds`; resolves with transactions per second. */
function runPgbench({ url, file, clients, seconds }) {
  const u = new URL(url);
  const args = [
    '-n', // no vacuum of the standard tables: the script uses its own
    '-f', file,
    '-c', String(clients),
    '-j', String(Math.min(clients, os.availableParallelism ? os.availableParallelism() : 2)),
    '-T', String(seconds),
    '-h', u.hostname,
    '-p', u.port || '5432',
    '-U', decodeURIComponent(u.username),
    decodeURIComponent(u.pathname.slice(1)),
  ];
  return new Promise((resolve, reject) => {
    execFile(
      PGBENCH,
      args,
      { env: { ...process.env, PGPASSWORD: decodeURIComponent(u.password) }, timeout: (seconds + 30) * 1000 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`pgbench failed: ${error.message}\n${stderr}`));
        const tps = stdout.match(/tps = ([\d.]+) \(without initial connection time\)/);
        const lat = stdout.match(/latency average = ([\d.]+) ms/);
        const tx = stdout.match(/number of transactions actually processed: (\d+)/);
        if (!tps) return reject(new Error(`cannot read pgbench output:\n${stdout}`));
        resolve({ tps: Number(tps[1]), latencyMs: lat ? Number(lat[1]) : null, transactions: tx ? Number(tx[1]) : null, args: args.slice(0, 10) });
      },
    );
  });
}

module.exports = { preparePgbench, runPgbench, pgbenchVersion, PGBENCH, SCRIPT };
