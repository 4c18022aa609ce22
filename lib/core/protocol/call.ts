import type { Pool } from 'pg';
import type { Queryable } from '../types';
import { fromPgError } from './errors';

/**
 * Sends one protocol statement (a constant of this folder) and answers its rows; a database
 * error comes back as {@link fromPgError} types it. Pass the client's `pool` for a client call
 * (`Queue`, `Admin`): then a missing schema and a connect timeout are typed too.
 */
export async function call<R>(db: Queryable, statement: string, values: readonly unknown[], pool?: Pool): Promise<R[]> {
  try {
    return (await db.query(statement, values as unknown[])).rows as R[];
  } catch (error) {
    throw fromPgError(error, pool);
  }
}

/** {@link call} for a statement that answers one row: that row. */
export async function callOne<R>(db: Queryable, statement: string, values: readonly unknown[], pool?: Pool): Promise<R> {
  return (await call<R>(db, statement, values, pool))[0];
}
