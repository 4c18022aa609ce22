import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool, PoolClient } from 'pg';
import { CheckedOutClient } from './checked-out-client';
import { applyConnectTimeout, fromConnectTimeout } from './connect-timeout';
import { SchemaNotInstalledError, SchemaVersionMismatchError } from './errors';

/**
 * The schema version this package ships. It changes whenever `sql/` changes in a way an
 * installed database must see; during 0.x there is no migration between versions. (The Go SDK's
 * tests read it from this line.)
 */
export const SCHEMA_VERSION = 4;

/** Where the protocol's `.sql` files live: `sql/` in the repository, `dist/sql/` when built. */
export const SQL_DIR = join(__dirname, '..', '..', 'sql');

// One key for every installer of this schema, so two processes starting at once take turns.
const INSTALL_LOCK_KEY = 7_362_515_001;

export interface SchemaStatus {
  /** The version installed in the database, or null when the schema is absent. */
  installed: number | null;
  /** The version this package ships. */
  expected: number;
  /** True when `installed === expected`. */
  upToDate: boolean;
}

/** Reads the installed schema version; never writes. */
export async function getSchemaStatus(pool: Pool | PoolClient): Promise<SchemaStatus> {
  const present = await pool.query<{ present: boolean }>(
    "SELECT to_regclass('workhorse.schema_version') IS NOT NULL AS present",
  );
  let installed: number | null = null;
  if (present.rows[0].present) {
    const row = await pool.query<{ version: number }>('SELECT version FROM workhorse.schema_version');
    installed = row.rows[0]?.version ?? null;
  }
  return { installed, expected: SCHEMA_VERSION, upToDate: installed === SCHEMA_VERSION };
}

/** What {@link installSchema} did. */
export interface InstallSchemaResult {
  /** True when this call created the schema; false when the right version was already there. */
  created: boolean;
  /** The schema version now installed (the one this package ships). */
  version: number;
}

/**
 * Installs the `workhorse` schema (tables, indexes and the versioned SQL functions) if it is
 * absent, and says whether it did. Calling it again for the same version does nothing, and
 * concurrent callers are serialised by an advisory lock. A database that holds another version
 * is refused with a {@link SchemaVersionMismatchError} that says what to do; nothing is changed.
 * A database that does not answer fails with a `ConnectTimeoutError` after the pool's connect
 * timeout (10 s unless the pool sets `connectionTimeoutMillis`).
 *
 * @example
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * const { created } = await installSchema(pool);
 */
export async function installSchema(pool: Pool): Promise<InstallSchemaResult> {
  applyConnectTimeout(pool);
  // Listened to while checked out: a connection killed mid-install fails the install, not the process.
  const checkedOut = await CheckedOutClient.take(pool).catch((error: unknown) => Promise.reject(fromConnectTimeout(error, pool)));
  const { client } = checkedOut;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [INSTALL_LOCK_KEY]);
    const status = await getSchemaStatus(client);
    if (status.installed === null) {
      for (const file of sqlFiles()) {
        await client.query(readFileSync(join(SQL_DIR, file), 'utf8'));
      }
      await client.query('INSERT INTO workhorse.schema_version (version) VALUES ($1)', [SCHEMA_VERSION]);
    } else if (!status.upToDate) {
      throw new SchemaVersionMismatchError(status.installed, SCHEMA_VERSION);
    }
    await client.query('COMMIT');
    return { created: status.installed === null, version: SCHEMA_VERSION };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw fromConnectTimeout(error, pool);
  } finally {
    checkedOut.release();
  }
}

/**
 * Refuses to go on unless the installed schema is the version this package ships: for
 * processes that must not change the database (`schema: 'verify'`).
 */
export async function verifySchema(pool: Pool): Promise<void> {
  applyConnectTimeout(pool);
  const status = await getSchemaStatus(pool).catch((error: unknown) => Promise.reject(fromConnectTimeout(error, pool)));
  if (status.installed === null) throw new SchemaNotInstalledError(SCHEMA_VERSION);
  if (!status.upToDate) throw new SchemaVersionMismatchError(status.installed, SCHEMA_VERSION);
}

function sqlFiles(): string[] {
  return readdirSync(SQL_DIR)
    .filter((name) => name.endsWith('.sql'))
    .sort();
}
