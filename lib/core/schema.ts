import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Pool, PoolClient } from 'pg';
import { CheckedOutClient } from './checked-out-client';
import { applyConnectTimeout, fromConnectTimeout } from './connect-timeout';
import { SchemaNotInstalledError, SchemaVersionMismatchError } from './errors';
import { BASELINE_SCHEMA_VERSION, readMigrationSteps, type MigrationStep, type MigrationStepInfo } from './migration-steps';
import { readInstalledSchema, worksWith } from './installed-schema';
import { migrateSchema, type InstallSchemaResult, type SchemaSource } from './schema-migrator';

export type { InstallSchemaResult } from './schema-migrator';

/**
 * The schema version this package ships: the number of its last migration step
 * (sql/migrations/NNNN_*.sql; a test keeps the two equal). (The Go SDK's tests read it from this line.)
 */
export const SCHEMA_VERSION = 20;

/**
 * The oldest installed schema version this package works with: every function its calls use
 * exists from this version on. A worker of this release starts against any version from here to
 * {@link SCHEMA_VERSION}. (20: job reads carry the concurrency key and the queue reads go
 * through list_queues_v3, step 20; Admin's operator actions on jobs call run_now_v1,
 * reschedule_v1, delete_job_v1 and the *_matching_v1 functions of step 19; `Queue.waitForResult`
 * calls await_results_v1, step 18, and `Queue.enqueueDeduped` enqueue_many_v2, step 17; the
 * dashboard reads through step 15's find_jobs_v1, job_durations_v1, job_timings_v1 and
 * error_groups_v1; the clients call step 13's login-role reads and save_checkpoint_v2 and step
 * 14's listings too. The Python and Go SDKs need 20 as well: their job reads carry the key.)
 */
export const MIN_SCHEMA_VERSION = 20;

/** Where the protocol's `.sql` files live: `sql/` in the repository, `dist/sql/` when built. */
export const SQL_DIR = join(__dirname, '..', '..', 'sql');

/** The migration steps: `sql/migrations/` (`dist/sql/migrations/` when built). */
export const MIGRATIONS_DIR = join(SQL_DIR, 'migrations');

export interface SchemaStatus {
  /** The version installed in the database, or null when the schema is absent. */
  installed: number | null;
  /** The version this package ships. */
  expected: number;
  /** The oldest installed version this package works with. */
  minimum: number;
  /**
   * The oldest client release (by the schema version it ships) whose calls the installed schema
   * still serves (`workhorse.oldest_client_v1()`); null when the schema is absent or older than
   * version 6, which did not say.
   */
  oldestClient: number | null;
  /** True when `installed === expected`. */
  upToDate: boolean;
  /**
   * True when this package works with the installed schema: a version from `minimum` to
   * `expected`, or a newer one that still serves this package (`oldestClient <= expected`).
   */
  compatible: boolean;
}

let shippedSteps: MigrationStep[] | undefined;

function steps(): MigrationStep[] {
  shippedSteps ??= readMigrationSteps(MIGRATIONS_DIR);
  return shippedSteps;
}

const SHIPPED: SchemaSource = {
  installSql: () =>
    readdirSync(SQL_DIR)
      .filter((name) => name.endsWith('.sql'))
      .sort()
      .map((file) => readFileSync(join(SQL_DIR, file), 'utf8')),
  steps,
  target: SCHEMA_VERSION,
  minimum: MIN_SCHEMA_VERSION,
};

/** Reads the installed schema version; never writes. */
export async function getSchemaStatus(pool: Pool | PoolClient): Promise<SchemaStatus> {
  const read = await readInstalledSchema(pool);
  const installed = read === 'damaged' ? null : read;
  return {
    installed: installed?.version ?? null,
    expected: SCHEMA_VERSION,
    minimum: MIN_SCHEMA_VERSION,
    oldestClient: installed?.oldestClient ?? null,
    upToDate: installed?.version === SCHEMA_VERSION,
    compatible: worksWith(installed, SCHEMA_VERSION, MIN_SCHEMA_VERSION),
  };
}

/**
 * The steps {@link installSchema} would apply to a database at `installed`, in order (none for
 * an absent schema, which is installed whole, or a version at or past this package's).
 */
export function pendingMigrationSteps(installed: number | null): MigrationStepInfo[] {
  if (installed === null || installed < BASELINE_SCHEMA_VERSION) return [];
  return steps()
    .filter((step) => step.version > installed && step.version <= SCHEMA_VERSION)
    .map(({ version, name, transactional }) => ({ version, name, transactional }));
}

/**
 * Installs the `workhorse` schema if it is absent, or upgrades it to the version this package
 * ships by applying each pending migration step (sql/migrations/) in its own transaction, and
 * says what it did. Run it as the schema's owner. Calling it again does nothing; concurrent
 * callers are serialised by a lock no application role can take, so each step is applied once.
 * Queued jobs, schedules and history are kept. A database newer than this package is refused
 * with a {@link SchemaVersionMismatchError} and one it cannot upgrade with a
 * `SchemaMigrationError`; neither changes anything. A database that does not answer fails with a
 * `ConnectTimeoutError` after the pool's connect timeout (10 s unless the pool sets
 * `connectionTimeoutMillis`).
 *
 * @example
 * const pool = new Pool({ connectionString: process.env.DATABASE_URL });
 * const { created, from, applied } = await installSchema(pool);
 */
export async function installSchema(pool: Pool): Promise<InstallSchemaResult> {
  applyConnectTimeout(pool);
  // Listened to while checked out: a connection killed mid-install fails the install, not the process.
  const checkedOut = await CheckedOutClient.take(pool).catch((error: unknown) => Promise.reject(fromConnectTimeout(error, pool)));
  try {
    return await migrateSchema(pool, checkedOut.client, SHIPPED);
  } catch (error) {
    throw fromConnectTimeout(error, pool);
  } finally {
    checkedOut.release();
  }
}

/**
 * Refuses to go on unless the installed schema is one this package works with
 * ({@link MIN_SCHEMA_VERSION} to {@link SCHEMA_VERSION}, or a newer one that still serves this
 * release: see {@link SchemaStatus.compatible}): for processes that must not change the database
 * (`schema: 'verify'`). An older one says to migrate, a newer one to upgrade the package.
 */
export async function verifySchema(pool: Pool): Promise<void> {
  applyConnectTimeout(pool);
  const status = await getSchemaStatus(pool).catch((error: unknown) => Promise.reject(fromConnectTimeout(error, pool)));
  if (status.installed === null) throw new SchemaNotInstalledError(SCHEMA_VERSION);
  if (!status.compatible) throw new SchemaVersionMismatchError(status.installed, SCHEMA_VERSION, MIN_SCHEMA_VERSION);
}
