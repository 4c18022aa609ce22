/**
 * Ending a process' connections from the outside, as an operator (`pg_terminate_backend`), a
 * pooler restart or a failover would, and noticing an `error` that nobody heard.
 */
import type { EventEmitter } from 'node:events';
import type { Pool } from 'pg';
import type { TestDatabase } from './db';

/** Backends in `db` of the process that named itself `appName`, filtered by an SQL condition on pg_stat_activity. */
export async function backendsOf(db: TestDatabase, appName: string, condition = 'true'): Promise<number[]> {
  const { rows } = await db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2 AND (${condition})`,
    [db.name, appName],
  );
  return rows.map((r) => r.pid);
}

/** Asks the server to end these backends (it returns at once; each ends when the server gets to it). */
export async function terminateBackends(db: TestDatabase, pids: number[]): Promise<void> {
  await db.pool.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
}

/**
 * An `error` that a pool or one of its clients emits with nobody listening would kill a real
 * process (Jest catches it outside the test body, as an unhandled error): record it in `unheard`
 * instead, so a test can assert there was none.
 */
export function recordUnheardErrors(pool: Pool, unheard: unknown[]): void {
  recordUnheard(pool, unheard);
  pool.on('connect', (client: EventEmitter) => recordUnheard(client, unheard));
}

function recordUnheard(emitter: EventEmitter, unheard: unknown[]): void {
  const emit = emitter.emit.bind(emitter);
  emitter.emit = (event: string | symbol, ...args: unknown[]): boolean => {
    if (event === 'error' && emitter.listenerCount('error') === 0) {
      unheard.push(args[0]);
      return false;
    }
    return emit(event, ...args);
  };
}
