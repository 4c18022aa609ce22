/**
 * What the embedded PostgreSQL process (`embedded-postgres.server.ts`) and the process that
 * starts it (`embedded-postgres.ts`) share: where the data lives, the credentials, and the
 * messages of their IPC channel.
 */
import { join } from 'node:path';

/** `sample-app/.pgdata` (git-ignored): initialised on the first run, reused by later ones. */
export const EMBEDDED_DATA_DIR = join(__dirname, '..', '.pgdata');

/**
 * Fixed credentials: the data directory outlives each run, and the server listens on 127.0.0.1
 * only. A development database, not a place for real data.
 */
export const EMBEDDED_USER = 'postgres';
export const EMBEDDED_PASSWORD = 'workhorse';

/** The URL of the embedded server's `postgres` database on `port`. */
export function embeddedDatabaseUrl(port: number): string {
  return `postgres://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/postgres`;
}

/** From the server process to its parent. */
export type EmbeddedServerMessage =
  | { type: 'initialised' }
  | { type: 'ready' }
  | { type: 'failed'; message: string };
