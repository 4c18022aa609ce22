/**
 * The migrator behind `installSchema`: installs the current schema into an empty database, or
 * applies the pending migration steps to an installed one, one step per transaction, serialised
 * against every other migrator by the row lock on `workhorse.schema_version` (docs/upgrading.md).
 *
 * A migrator that finds the lock taken does not queue for it: it polls (SKIP LOCKED, then a short
 * pause). A blocked `SELECT ... FOR UPDATE` would hold a snapshot, and `CREATE INDEX
 * CONCURRENTLY` in the lock holder's no-transaction step waits for every older snapshot to end:
 * the two would wait for each other forever.
 */
import type { Pool, PoolClient } from 'pg';
import { CheckedOutClient } from './checked-out-client';
import { SchemaMigrationError, SchemaVersionMismatchError } from './errors';
import { readInstalledSchema, worksWith, type InstalledSchema } from './installed-schema';
import { BASELINE_SCHEMA_VERSION, splitStatements, type MigrationStep } from './migration-steps';

/** Only for fresh installs: no application role exists before the install grants one. */
const INSTALL_LOCK_KEY = 7_362_515_001;

/** How long a migrator waits before it looks at the migration lock again. */
const LOCK_POLL_MS = 100;

/** What a migrator installs: the current schema's files, the steps that lead to it, and its version. */
export interface SchemaSource {
  /** The SQL of every top-level file (sql/*.sql), in the order they run. */
  installSql: () => string[];
  /** Every step this package ships, in version order. */
  steps: () => MigrationStep[];
  /** The version the files describe and the last step leads to. */
  target: number;
  /** The oldest installed version this package's calls still work with. */
  minimum: number;
}

/** What {@link installSchema} did. */
export interface InstallSchemaResult {
  /** True when this call created the schema (from the top-level files, in one transaction). */
  created: boolean;
  /** The version installed before the call; null when the schema was absent. */
  from: number | null;
  /**
   * The version installed now: the one this package ships, or a newer one that still serves this
   * release (left as it is: a schema is never downgraded).
   */
  to: number;
  /** The versions of the steps this call applied, in order (empty when created or up to date). */
  applied: number[];
}

async function installedVersion(client: PoolClient): Promise<InstalledSchema | null> {
  const installed = await readInstalledSchema(client);
  if (installed === 'damaged') throw damaged();
  return installed;
}

function damaged(): SchemaMigrationError {
  return new SchemaMigrationError(
    'workhorse.schema_version has no row, so the installed version is unknown: the schema is damaged. Nothing was changed; ' +
      'restore the row (or the database) before migrating.',
    null,
  );
}

/**
 * Creates the schema unless it exists; returns the version installed afterwards and whether this
 * call made it. Everything happens in one transaction under a transaction-level lock, so it also
 * holds behind a transaction-pooling PgBouncer (a session lock could be taken on one server
 * connection and the install run on another). Whether another installer got there first is read
 * from pg_class with the statement's snapshot, not through a name lookup: this session's catalog
 * cache may still hold the "no such schema" it saw before the lock was granted (an advisory lock
 * does not make a backend take in other sessions' catalog changes), so the version is read only
 * after this transaction has ended, in a fresh one.
 */
async function installFresh(client: PoolClient, source: SchemaSource): Promise<{ created: boolean; installed: InstalledSchema | null }> {
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [INSTALL_LOCK_KEY]);
    const { rows } = await client.query<{ present: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = 'workhorse' AND c.relname = 'schema_version') AS present`,
    );
    if (rows[0].present) {
      await client.query('COMMIT');
      return { created: false, installed: await installedVersion(client) };
    }
    for (const sql of source.installSql()) await client.query(sql);
    await client.query('INSERT INTO workhorse.schema_version (version) VALUES ($1)', [source.target]);
    await client.query("INSERT INTO workhorse.schema_migration (version, name) VALUES ($1, 'install')", [source.target]);
    await client.query('COMMIT');
    return { created: true, installed: null };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** The role that owns the schema, after checking that this session may act as it. */
async function schemaOwner(client: PoolClient, step: MigrationStep): Promise<string> {
  const { rows } = await client.query<{ owner: string; member: boolean }>(
    `SELECT r.rolname AS owner, pg_has_role(current_user, n.nspowner, 'MEMBER') AS member
     FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner WHERE n.nspname = 'workhorse'`,
  );
  if (!rows[0].member) throw refusedRole(step, new Error(`the role ${rows[0].owner} owns the schema`));
  return rows[0].owner;
}

function refusedRole(step: MigrationStep, error: unknown): SchemaMigrationError {
  return new SchemaMigrationError(
    `Cannot migrate the workhorse schema to version ${step.version} as this role: ${(error as Error).message}. ` +
      "Run the migration as the schema's owner (the role that installed it) or a superuser; application roles " +
      '(producer, worker, operator) may not.',
    step.version,
    { cause: error, roleRefused: true },
  );
}

/**
 * Begins a transaction as the schema's owner (so what a step creates belongs to the owner, as
 * what the install created does) and takes the migration lock: the row of schema_version FOR
 * UPDATE, which needs the UPDATE privilege no application role holds. Waits while another
 * migrator holds it. Returns the version, with the transaction open.
 */
async function lockVersion(client: PoolClient, step: MigrationStep): Promise<number> {
  for (;;) {
    await client.query('BEGIN');
    const owner = await schemaOwner(client, step);
    let rows: { version: number }[];
    try {
      await client.query(`SET LOCAL ROLE ${client.escapeIdentifier(owner)}`);
      ({ rows } = await client.query<{ version: number }>('SELECT version FROM workhorse.schema_version FOR UPDATE SKIP LOCKED'));
    } catch (error) {
      throw refusedRole(step, error);
    }
    if (rows.length > 0) return rows[0].version;
    // No row unlocked: another migrator holds it, or there is none at all (a damaged schema).
    const { rows: all } = await client.query<{ n: number }>('SELECT count(*)::integer AS n FROM workhorse.schema_version');
    await client.query('COMMIT');
    if (all[0].n === 0) throw damaged();
    await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
  }
}

async function recordStep(client: PoolClient, step: MigrationStep): Promise<void> {
  await client.query('UPDATE workhorse.schema_version SET version = $1', [step.version]);
  await client.query('INSERT INTO workhorse.schema_migration (version, name) VALUES ($1, $2) ON CONFLICT (version) DO NOTHING', [
    step.version,
    step.name,
  ]);
}

function stepFailed(step: MigrationStep, from: number, error: unknown): SchemaMigrationError {
  const kept = step.transactional
    ? 'Nothing of this step was applied (it runs in one transaction)'
    : 'The statements before the failing one may have been applied; the step is resumable';
  return new SchemaMigrationError(
    `Migration step ${step.file} (version ${from} to ${step.version}) failed: ${(error as Error).message}. ${kept}, ` +
      `and the database stays at version ${from}: fix the cause and migrate again.`,
    step.version,
    { cause: error },
  );
}

/** Applies one step unless another migrator did; says whether this call applied it. */
async function applyStep(client: PoolClient, pool: Pool, step: MigrationStep): Promise<boolean> {
  if (!step.transactional) return applyOutsideTransaction(client, pool, step);
  const before = await lockVersion(client, step);
  if (before >= step.version) {
    await client.query('COMMIT');
    return false;
  }
  try {
    await client.query(step.sql);
  } catch (error) {
    throw stepFailed(step, before, error);
  }
  await recordStep(client, step);
  await client.query('COMMIT');
  return true;
}

/**
 * A no-transaction step: a second connection holds the migration lock while this one runs the
 * statements one by one (as the schema's owner), then the holder records the step and commits.
 * A run that dies half-way leaves the version where it was; the step's statements are written
 * to be run again (IF NOT EXISTS, dropping an INVALID index first).
 */
async function applyOutsideTransaction(client: PoolClient, pool: Pool, step: MigrationStep): Promise<boolean> {
  if ((pool.options.max ?? 10) < 2) {
    throw new SchemaMigrationError(
      `Migration step ${step.file} runs outside a transaction, and the migrator then needs two connections (one holds the ` +
        'migration lock while the other runs the step), but this pool allows one (max: 1). Migrate with a pool of max 2 or ' +
        'more (the `workhorse schema migrate` command does). Nothing of this step was applied.',
      step.version,
    );
  }
  const holder = await CheckedOutClient.take(pool);
  let failure: Error | undefined;
  try {
    const before = await lockVersion(holder.client, step);
    if (before >= step.version) {
      await holder.client.query('COMMIT');
      return false;
    }
    const owner = await schemaOwner(client, step);
    const { rows } = await client.query<{ is_owner: boolean }>('SELECT current_user = $1 AS is_owner', [owner]);
    // A session-level SET ROLE only when the login role is not the owner already: outside a
    // transaction it would outlive this client behind a transaction-pooling PgBouncer, so such a
    // step needs a direct (or session-pooled) connection unless the owner logs in itself.
    const switchRole = !rows[0].is_owner;
    try {
      if (switchRole) await client.query(`SET ROLE ${client.escapeIdentifier(owner)}`);
      for (const statement of splitStatements(step.sql)) await client.query(statement);
    } catch (error) {
      throw stepFailed(step, before, error);
    } finally {
      if (switchRole) await client.query('RESET ROLE').catch(() => undefined);
    }
    await recordStep(holder.client, step);
    await holder.client.query('COMMIT');
    return true;
  } catch (error) {
    failure = error as Error;
    await holder.client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    holder.release(failure);
  }
}

/**
 * Installs or upgrades the schema on `client` to `source.target` (see {@link SchemaSource}); a
 * no-transaction step takes a second connection from `pool` to hold the lock.
 * A database newer than the target is refused with a {@link SchemaVersionMismatchError}; one
 * this package has no steps for, with a {@link SchemaMigrationError}. Either way nothing changes.
 */
export async function migrateSchema(pool: Pool, client: PoolClient, source: SchemaSource): Promise<InstallSchemaResult> {
  try {
    let installed = await installedVersion(client);
    if (installed === null) {
      const fresh = await installFresh(client, source);
      if (fresh.created) return { created: true, from: null, to: source.target, applied: [] };
      installed = fresh.installed;
      if (installed === null) throw damaged();
    }
    const from = installed.version;
    if (from > source.target) {
      // Never a downgrade. A newer schema that still serves this release is left as it is.
      if (worksWith(installed, source.target, source.minimum)) {
        return { created: false, from, to: from, applied: [] };
      }
      throw new SchemaVersionMismatchError(from, source.target, source.minimum);
    }
    if (from === source.target) return { created: false, from, to: source.target, applied: [] };
    if (from < BASELINE_SCHEMA_VERSION) {
      throw new SchemaMigrationError(
        `The workhorse schema in this database is version ${from}, older than version ${BASELINE_SCHEMA_VERSION}, the first ` +
          'one that can be migrated: no release ever installed it with an upgrade path. Nothing was changed.',
        null,
      );
    }
    const steps = source.steps().filter((step) => step.version > from && step.version <= source.target);
    const missing: number[] = [];
    for (let version = from + 1; version <= source.target; version++) {
      if (!steps.some((step) => step.version === version)) missing.push(version);
    }
    if (missing.length > 0) {
      throw new SchemaMigrationError(
        `Cannot migrate the workhorse schema from version ${from} to ${source.target}: this package lacks the step ` +
          `file(s) for version ${missing.join(', ')} (sql/migrations/NNNN_*.sql). Reinstall the package; nothing was changed.`,
        missing[0],
      );
    }
    const applied: number[] = [];
    for (const step of steps) {
      if (await applyStep(client, pool, step)) applied.push(step.version);
    }
    return { created: false, from, to: source.target, applied };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
