'use strict';
/**
 * The PostgreSQL server of a benchmark run: the embedded server of the test harness
 * (startEmbeddedPostgres of lib/testing, with test/support/test-server.ts' options), started
 * durable, or the server named by BENCH_DATABASE_URL. Every system gets fresh databases on this
 * one server.
 */
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { Client } = require('pg');

/**
 * The test harness turns durability off (fsync, synchronous_commit, full_page_writes), which
 * is right for tests and wrong for a benchmark: it would hide the commit cost that dominates
 * a job queue. The benchmark's server is started durable, and checked to be.
 */
const DURABILITY_SETTINGS = new Set(['fsync', 'synchronous_commit', 'full_page_writes']);

/**
 * Settings the benchmark adds. pg_stat_statements is loaded for the diagnosis phase but tracks
 * nothing unless a database turns it on (`track` is per database), so the measured runs do
 * not pay for it.
 */
const BENCH_SETTINGS = [
  'shared_preload_libraries=pg_stat_statements',
  'pg_stat_statements.track=none',
  'pg_stat_statements.max=5000',
  'pg_stat_statements.track_utility=off',
];

function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${encodeURIComponent(database)}`;
  return u.toString();
}

async function withClient(url, work) {
  const client = new Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The postmaster's pid when the server runs on this machine and its data directory is readable. */
function readPostmasterPid(dataDir) {
  try {
    const pid = Number.parseInt(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0], 10);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function procTicks(pid, withChildren) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[11..14] = utime, stime, cutime, cstime (man 5 proc, counted from field 3)
    const own = Number(fields[11]) + Number(fields[12]);
    return withChildren ? own + Number(fields[13]) + Number(fields[14]) : own;
  } catch {
    return 0;
  }
}

function childPids(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * CPU seconds used by the whole server so far: the postmaster, its live backends and
 * background processes, and (through cutime/cstime) every backend that already exited.
 */
function serverCpuSeconds(postmasterPid) {
  if (!postmasterPid) return null;
  let ticks = procTicks(postmasterPid, true);
  for (const child of childPids(postmasterPid)) ticks += procTicks(child, false);
  return ticks / 100; // USER_HZ is 100 on Linux
}

/**
 * Starts the server (or connects to BENCH_DATABASE_URL) and checks that durability is on.
 * Returns { url, external, version, settings, postmasterPid, stop, createDatabase, dropDatabase }.
 */
async function startServer({ log }) {
  let url = process.env.BENCH_DATABASE_URL;
  let stop = async () => undefined;
  let dataDir = null;
  const external = Boolean(url);
  if (!external) {
    // The launcher is TypeScript; ts-register transpiles it on the fly (no build needed).
    require('../../support/ts-register.js');
    const { startEmbeddedPostgres } = require('../../../lib/testing/embedded-postgres.ts');
    const { TEST_SERVER_OPTIONS } = require('../../support/test-server.ts');
    log('starting embedded PostgreSQL (durable settings)');
    const server = await startEmbeddedPostgres({
      ...TEST_SERVER_OPTIONS,
      durable: true,
      settings: [...TEST_SERVER_OPTIONS.settings, ...BENCH_SETTINGS],
    });
    url = server.url;
    dataDir = server.dataDir;
    stop = () => server.stop();
  }

  const info = await withClient(url, async (client) => {
    const version = (await client.query('SHOW server_version')).rows[0].server_version;
    const settings = (
      await client.query(
        `SELECT name, current_setting(name) AS setting, source FROM pg_settings
          WHERE source NOT IN ('default', 'override', 'client')
             OR name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_level', 'shared_buffers',
                         'max_wal_size', 'checkpoint_timeout', 'autovacuum', 'max_connections', 'work_mem',
                         'effective_io_concurrency', 'wal_sync_method', 'commit_delay')
          ORDER BY name`,
      )
    ).rows;
    const dir = (await client.query('SHOW data_directory').catch(() => ({ rows: [{}] }))).rows[0].data_directory;
    return { version, settings, dir };
  });
  const durable = Object.fromEntries(
    info.settings.filter((s) => DURABILITY_SETTINGS.has(s.name)).map((s) => [s.name, s.setting]),
  );
  if (durable.fsync !== 'on' || durable.synchronous_commit !== 'on' || durable.full_page_writes !== 'on') {
    await stop().catch(() => undefined);
    throw new Error(
      `the benchmark needs a durable server (fsync, synchronous_commit and full_page_writes on); got ${JSON.stringify(durable)}`,
    );
  }
  const postmasterPid = readPostmasterPid(dataDir ?? info.dir ?? '');

  return {
    url,
    external,
    version: info.version,
    settings: info.settings,
    postmasterPid,
    stop,
    databaseUrl: (name) => withDatabase(url, name),
    withClient: (work, database) => withClient(database ? withDatabase(url, database) : url, work),
    cpuSeconds: () => serverCpuSeconds(postmasterPid),
    async createDatabase(name) {
      await withClient(url, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
      return withDatabase(url, name);
    },
    async dropDatabase(name) {
      await withClient(url, (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
    },
  };
}

module.exports = { startServer, withClient, withDatabase };
