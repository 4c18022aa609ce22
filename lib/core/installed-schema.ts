/**
 * Reads which schema version a database holds, and the oldest client release that version still
 * serves: what `getSchemaStatus`, `verifySchema` and the migrator decide by.
 */
import type { Pool, PoolClient } from 'pg';
import { HAS_SCHEMA, INSTALLED_VERSION, OLDEST_CLIENT } from './protocol/session';

/** The installed schema, as far as a client must know it. */
export interface InstalledSchema {
  /** `workhorse.schema_version.version`. */
  version: number;
  /**
   * `workhorse.oldest_client_v1()` (schema version 6 on): the oldest client release, by the
   * schema version it ships, whose calls this schema serves. Null before version 6, or when this
   * role may not call it.
   */
  oldestClient: number | null;
}

/**
 * Null when the schema is absent. A `schema_version` without its row is `'damaged'`: the
 * version is unknown, and nothing may be decided by it.
 */
export async function readInstalledSchema(db: Pool | PoolClient): Promise<InstalledSchema | null | 'damaged'> {
  const present = await db.query<{ present: boolean }>(HAS_SCHEMA);
  if (!present.rows[0].present) return null;
  const { rows } = await db.query<{ version: number; callable: boolean | null }>(INSTALLED_VERSION);
  if (rows.length === 0) return 'damaged';
  let oldestClient: number | null = null;
  if (rows[0].callable) {
    const floor = await db.query<{ oldest: number }>(OLDEST_CLIENT);
    oldestClient = floor.rows[0].oldest;
  }
  return { version: rows[0].version, oldestClient };
}

/** Whether a package that ships `expected` and needs at least `minimum` works with `installed`. */
export function worksWith(installed: InstalledSchema | null, expected: number, minimum: number): boolean {
  if (installed === null || installed.version < minimum) return false;
  return installed.version <= expected || (installed.oldestClient !== null && installed.oldestClient <= expected);
}
