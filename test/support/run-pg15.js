#!/usr/bin/env node
'use strict';
/**
 * Runs the whole Jest suite against Debian's PostgreSQL 15 (package postgresql-15) instead of
 * the embedded server: `npm run test:pg15 [-- <jest args>]`.
 *
 * It creates a throw-away cluster in a temporary directory, starts it on a free loopback
 * port, runs Jest with WORKHORSE_TEST_DATABASE_URL pointing at it, and then always stops the
 * server and removes the directory, exiting with Jest's exit code. PostgreSQL refuses to run
 * as root, so as root the server programs run as the OS user `postgres`.
 */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const PG_BIN = process.env.WORKHORSE_PG15_BIN || '/usr/lib/postgresql/15/bin';
const PG_USER = 'postgres';
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

function log(message) {
  process.stderr.write(`run-pg15: ${message}\n`);
}

function fail(message) {
  log(message);
  process.exit(1);
}

/** The command line that runs a PostgreSQL program, as `postgres` when we are root. */
function asServerUser(program, args) {
  const file = path.join(PG_BIN, program);
  if (!isRoot) return [file, args];
  if (fs.existsSync('/usr/sbin/runuser') || fs.existsSync('/sbin/runuser')) {
    return ['runuser', ['-u', PG_USER, '--', file, ...args]];
  }
  const quoted = [file, ...args].map((word) => `'${String(word).replace(/'/g, `'\\''`)}'`).join(' ');
  return ['su', ['-s', '/bin/sh', PG_USER, '-c', quoted]];
}

/** Runs a PostgreSQL program to completion; its output is returned, not printed. */
function runServerProgram(program, args, cwd) {
  const [file, argv] = asServerUser(program, args);
  const result = spawnSync(file, argv, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const output = `${result.stdout || ''}${result.stderr || ''}`.trim();
  if (result.error) return { ok: false, output: `${result.error.message}\n${output}` };
  return { ok: result.status === 0, output };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.unref();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

function userIds(name) {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

function readFileQuietly(file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

async function main() {
  for (const program of ['initdb', 'pg_ctl', 'postgres']) {
    if (!fs.existsSync(path.join(PG_BIN, program))) {
      fail(
        `PostgreSQL 15 is not installed: ${path.join(PG_BIN, program)} does not exist.\n` +
          "Install Debian's server package (apt-get install postgresql-15), or run `npm test`, " +
          'which uses the embedded PostgreSQL server.',
      );
    }
  }
  let ids;
  if (isRoot) {
    ids = userIds(PG_USER);
    if (!ids) fail(`running as root, but there is no OS user '${PG_USER}' to run PostgreSQL as.`);
  }

  const jestBin = require.resolve('jest/bin/jest', { paths: [process.cwd(), path.join(__dirname, '..', '..')] });
  const tempDir = fs.mkdtempSync(path.join(os.tmpdir(), 'workhorse-pg15-'));
  const dataDir = path.join(tempDir, 'data');
  const logFile = path.join(tempDir, 'server.log');
  let started = false;
  let stopped = false;

  const stopServer = () => {
    if (stopped) return;
    stopped = true;
    if (started && fs.existsSync(path.join(dataDir, 'postmaster.pid'))) {
      const stop = runServerProgram('pg_ctl', ['stop', '-D', dataDir, '-m', 'fast', '-w', '-t', '60'], tempDir);
      if (!stop.ok) {
        log(`pg_ctl stop failed; killing the server.\n${stop.output}`);
        const pid = Number.parseInt(readFileQuietly(path.join(dataDir, 'postmaster.pid')).split('\n')[0], 10);
        if (pid > 0) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
    }
    fs.rmSync(tempDir, { recursive: true, force: true });
  };
  // Last resort if this process ends some other way (the normal paths call stopServer first).
  process.on('exit', stopServer);

  try {
    if (ids) fs.chownSync(tempDir, ids.uid, ids.gid);
    const port = await freePort();

    const init = runServerProgram(
      'initdb',
      ['-D', dataDir, '-A', 'trust', '-U', PG_USER, '-E', 'UTF8', '--locale=C', '--no-sync'],
      tempDir,
    );
    if (!init.ok) throw new Error(`initdb failed:\n${init.output}`);

    const options = [
      `-p ${port}`,
      `-k ${tempDir}`,
      '-c listen_addresses=127.0.0.1',
      '-c max_connections=300',
      '-c fsync=off',
    ].join(' ');
    const start = runServerProgram('pg_ctl', ['start', '-D', dataDir, '-l', logFile, '-w', '-t', '60', '-o', options], tempDir);
    started = true; // even a failed start may have left a server behind: stop it regardless
    if (!start.ok) throw new Error(`pg_ctl start failed:\n${start.output}\n${readFileQuietly(logFile)}`);

    const ready = runServerProgram('pg_isready', ['-h', '127.0.0.1', '-p', String(port), '-U', PG_USER, '-t', '30'], tempDir);
    if (!ready.ok) throw new Error(`the server does not accept connections:\n${ready.output}\n${readFileQuietly(logFile)}`);

    const version = runServerProgram('postgres', ['--version'], tempDir).output;
    log(`${version} on 127.0.0.1:${port}, data in ${dataDir}`);

    const code = await new Promise((resolve) => {
      const child = spawn(process.execPath, [jestBin, ...process.argv.slice(2)], {
        stdio: 'inherit',
        env: { ...process.env, WORKHORSE_TEST_DATABASE_URL: `postgres://${PG_USER}@127.0.0.1:${port}/postgres` },
      });
      // Ctrl-C reaches Jest directly (same process group); forward signals sent to us alone,
      // and stay alive until Jest is done so that the server is stopped afterwards.
      const forward = (signal) => child.kill(signal);
      process.on('SIGINT', forward);
      process.on('SIGTERM', forward);
      process.on('SIGHUP', forward);
      child.on('error', (error) => {
        log(`could not run Jest: ${error.message}`);
        resolve(1);
      });
      child.on('exit', (status, signal) => {
        process.off('SIGINT', forward);
        process.off('SIGTERM', forward);
        process.off('SIGHUP', forward);
        resolve(status ?? (signal ? 128 + (os.constants.signals[signal] || 0) : 1));
      });
    });
    stopServer();
    process.exitCode = code;
  } catch (error) {
    log(error instanceof Error ? error.message : String(error));
    stopServer();
    process.exitCode = 1;
  }
}

main().catch((error) => {
  log(error instanceof Error ? error.stack : String(error));
  process.exitCode = 1;
});
