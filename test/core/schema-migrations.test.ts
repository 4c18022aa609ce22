/**
 * Issue 29, items 1 and 2: ordered migrations from the baseline (schema version 4, commit
 * a46ad78). A fresh install of today's sql/ and an upgrade of the baseline's sql/ (read from git
 * history) end in the same catalog, also after roles are granted; concurrent migrators apply
 * each step once; a newer database is refused unchanged; application roles can neither take nor
 * block the migration lock; missing, failing and no-transaction steps behave as documented.
 */
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'pg';
import {
  getSchemaStatus,
  grantAppRole,
  grantRole,
  installSchema,
  MIN_SCHEMA_VERSION,
  pendingMigrationSteps,
  SCHEMA_VERSION,
  SchemaMigrationError,
  SchemaVersionMismatchError,
  verifySchema,
} from '../../lib/core';
import { BASELINE_SCHEMA_VERSION, MigrationFilesError, readMigrationSteps, splitStatements } from '../../lib/core/migration-steps';
import { MIGRATIONS_DIR, SQL_DIR } from '../../lib/core/schema';
import { migrateSchema, type SchemaSource } from '../../lib/core/schema-migrator';
import { BASELINE_VERSION, baselineSql, installBaseline } from '../support/baseline';
import { workhorseCatalog } from '../support/catalog';
import { fencedBlocks } from '../support/markdown';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { expectRejects } from '../support/expect-rejects';
import { clientFor, LoginRoles, poolFor, sqlstateOf } from '../support/roles';

const INSTALL_LOCK_KEY = 7_362_515_001;
const ROOT = join(__dirname, '..', '..');

const databases: TestDatabase[] = [];
const pools: Pool[] = [];
const roles = new LoginRoles();
const scratch: string[] = [];

afterAll(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.end()));
  await Promise.all(databases.splice(0).map((db) => db.drop()));
  await roles.dropAll();
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

async function emptyDatabase(): Promise<TestDatabase> {
  const db = await createTestDatabase({ installSchema: false });
  databases.push(db);
  return db;
}

async function baselineDatabase(): Promise<TestDatabase> {
  const db = await emptyDatabase();
  await installBaseline(db.pool);
  return db;
}

async function logRows(pool: Pool): Promise<{ version: number; name: string }[]> {
  const { rows } = await pool.query<{ version: number; name: string }>('SELECT version, name FROM workhorse.schema_migration ORDER BY version');
  return rows;
}


async function installedVersion(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ version: number }>('SELECT version FROM workhorse.schema_version');
  return rows[0].version;
}

/** The shipped schema plus extra steps written to a scratch directory (copies of the real ones first). */
function sourceWithSteps(extra: Record<string, string>): SchemaSource {
  const dir = mkdtempSync(join(tmpdir(), 'workhorse-steps-'));
  scratch.push(dir);
  for (const name of readdirSync(MIGRATIONS_DIR)) copyFileSync(join(MIGRATIONS_DIR, name), join(dir, name));
  for (const [name, sql] of Object.entries(extra)) writeFileSync(join(dir, name), sql);
  const steps = readMigrationSteps(dir);
  return {
    installSql: () =>
      readdirSync(SQL_DIR)
        .filter((name) => name.endsWith('.sql'))
        .sort()
        .map((name) => readFileSync(join(SQL_DIR, name), 'utf8')),
    steps: () => steps,
    target: steps[steps.length - 1].version,
    minimum: MIN_SCHEMA_VERSION,
  };
}

/** The versions a test's own extra steps lead to, after the shipped ones. */
const NEXT = SCHEMA_VERSION + 1;
const AFTER = SCHEMA_VERSION + 2;

function stepFile(version: number, slug: string): string {
  return `${String(version).padStart(4, '0')}_${slug}.sql`;
}

/** The migration log of a database upgraded from the baseline by the shipped steps. */
function shippedLog(): { version: number; name: string }[] {
  return readMigrationSteps(MIGRATIONS_DIR).map(({ version, name }) => ({ version, name }));
}

/** The versions of every shipped step, in order. */
function allSteps(): number[] {
  return Array.from({ length: SCHEMA_VERSION - BASELINE_VERSION }, (_, i) => BASELINE_VERSION + 1 + i);
}

async function migrateWith(pool: Pool, source: SchemaSource) {
  const client = await pool.connect();
  try {
    return await migrateSchema(pool, client, source);
  } finally {
    client.release();
  }
}

describe('the shipped steps', () => {
  it('run from the baseline without gaps, and the last one is SCHEMA_VERSION', () => {
    const steps = readMigrationSteps(MIGRATIONS_DIR);
    expect(steps.length).toBeGreaterThan(0);
    expect(steps.map((step) => step.version)).toEqual(Array.from({ length: steps.length }, (_, i) => BASELINE_SCHEMA_VERSION + 1 + i));
    expect(steps[steps.length - 1].version).toBe(SCHEMA_VERSION);
    expect(steps[0]).toMatchObject({ version: 5, name: 'migration_log', file: '0005_migration_log.sql', transactional: true });
    // CREATE INDEX CONCURRENTLY cannot run inside a transaction: only a no-transaction step may use it.
    for (const step of steps.filter((s) => s.transactional)) expect([step.file, /CONCURRENTLY/i.test(step.sql)]).toEqual([step.file, false]);
    expect(MIN_SCHEMA_VERSION).toBeGreaterThanOrEqual(BASELINE_SCHEMA_VERSION);
    expect(MIN_SCHEMA_VERSION).toBeLessThanOrEqual(SCHEMA_VERSION);
  });

  it('refuses step files with a gap, a duplicate or a bad name', () => {
    const write = (files: Record<string, string>) => {
      const dir = mkdtempSync(join(tmpdir(), 'workhorse-steps-'));
      scratch.push(dir);
      for (const [name, sql] of Object.entries(files)) writeFileSync(join(dir, name), sql);
      return dir;
    };
    expect(() => readMigrationSteps(write({ '0005_a.sql': 'SELECT 1', '0007_c.sql': 'SELECT 1' }))).toThrow(
      /expected the step to version 6 next, found 0007_c\.sql/,
    );
    expect(() => readMigrationSteps(write({ '0005_a.sql': 'SELECT 1', '0005_b.sql': 'SELECT 1' }))).toThrow(MigrationFilesError);
    expect(() => readMigrationSteps(write({ '0006_a.sql': 'SELECT 1' }))).toThrow(/expected the step to version 5 next/);
    expect(() => readMigrationSteps(write({ '5_Add.sql': 'SELECT 1' }))).toThrow(/named NNNN_<slug>\.sql/);
  });

  it('splits a no-transaction step into statements, not inside quotes, bodies or comments', () => {
    const sql = [
      '-- workhorse:no-transaction',
      "CREATE INDEX CONCURRENTLY IF NOT EXISTS a ON t (x) WHERE y = 'a;b';",
      '-- a comment; with a semicolon',
      'DO $do$ BEGIN PERFORM 1; PERFORM 2; END $do$;',
      'CREATE INDEX "odd;name" ON t (x) /* ; */',
    ].join('\n');
    expect(splitStatements(sql).map((s) => s.trim())).toEqual([
      "-- workhorse:no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a ON t (x) WHERE y = 'a;b'",
      '-- a comment; with a semicolon\nDO $do$ BEGIN PERFORM 1; PERFORM 2; END $do$',
      'CREATE INDEX "odd;name" ON t (x) /* ; */',
    ]);
  });

  it('knows tags with digits, E strings, nested comments and identifiers with a dollar sign', () => {
    const sql = [
      'DO $fn1$ BEGIN PERFORM 1; END $fn1$;',
      "SELECT E'it\\'s; fine', 'plain\\';",
      'SELECT 1 /* outer /* inner; */ still; comment */;',
      'SELECT a$b$c FROM t; SELECT 2',
    ].join('\n');
    expect(splitStatements(sql).map((s) => s.trim())).toEqual([
      'DO $fn1$ BEGIN PERFORM 1; END $fn1$',
      "SELECT E'it\\'s; fine', 'plain\\'",
      'SELECT 1 /* outer /* inner; */ still; comment */',
      'SELECT a$b$c FROM t',
      'SELECT 2',
    ]);
  });
});

describe('a fresh install and an upgrade from the baseline', () => {
  let fresh: TestDatabase;
  let upgraded: TestDatabase;

  beforeAll(async () => {
    fresh = await emptyDatabase();
    upgraded = await baselineDatabase();
  });

  it('end in the same catalog: tables, columns, indexes, constraints, functions, grants, partitions, owners', async () => {
    const baseline = await workhorseCatalog(upgraded.pool);
    await expect(installSchema(fresh.pool)).resolves.toEqual({ created: true, from: null, to: SCHEMA_VERSION, applied: [] });
    await expect(installSchema(upgraded.pool)).resolves.toEqual({
      created: false,
      from: BASELINE_VERSION,
      to: SCHEMA_VERSION,
      applied: Array.from({ length: SCHEMA_VERSION - BASELINE_VERSION }, (_, i) => BASELINE_VERSION + 1 + i),
    });
    const freshCatalog = await workhorseCatalog(fresh.pool);
    // The comparison sees a difference: the baseline lacks what the steps add.
    expect(baseline).not.toEqual(freshCatalog);
    expect(freshCatalog.some((line) => line.startsWith('relation schema_migration '))).toBe(true);
    expect(freshCatalog.filter((line) => line.startsWith('function ')).length).toBeGreaterThan(60);
    expect(freshCatalog.some((line) => /^relation job_event_p\d{8} kind=r .* parent=workhorse\.job_event bound=FOR VALUES/.test(line))).toBe(true);
    expect(await workhorseCatalog(upgraded.pool)).toEqual(freshCatalog);

    // The log: one 'install' row for the fresh install, one row per step for the upgrade.
    expect(await logRows(fresh.pool)).toEqual([{ version: SCHEMA_VERSION, name: 'install' }]);
    expect(await logRows(upgraded.pool)).toEqual(readMigrationSteps(MIGRATIONS_DIR).map(({ version, name }) => ({ version, name })));
    expect(await installedVersion(upgraded.pool)).toBe(SCHEMA_VERSION);
  });

  it('and again after the same roles are granted on both (ACLs included)', async () => {
    const app = await roles.create(fresh.url, 'wh_mig_app');
    const producer = await roles.create(fresh.url, 'wh_mig_producer');
    const worker = await roles.create(fresh.url, 'wh_mig_worker');
    for (const db of [fresh, upgraded]) {
      await grantAppRole(db.pool, app.name);
      await grantRole(db.pool, producer.name, 'producer');
      await grantRole(db.pool, worker.name, ['worker']);
    }
    const catalog = await workhorseCatalog(fresh.pool);
    expect(catalog.some((line) => line.startsWith('function workhorse.claim_many_v1(') && line.includes(worker.name))).toBe(true);
    expect(await workhorseCatalog(upgraded.pool)).toEqual(catalog);
  });

  it('the migrated schema works for this package: verifySchema accepts it, and migrating again does nothing', async () => {
    await expect(verifySchema(upgraded.pool)).resolves.toBeUndefined();
    const before = await workhorseCatalog(upgraded.pool);
    await expect(installSchema(upgraded.pool)).resolves.toEqual({ created: false, from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
    expect(await workhorseCatalog(upgraded.pool)).toEqual(before);
    expect(await logRows(upgraded.pool)).toHaveLength(SCHEMA_VERSION - BASELINE_VERSION);
  });
});

describe('concurrent migrators', () => {
  it('several pools migrating one baseline database at once apply each step once, with one log row each', async () => {
    const db = await baselineDatabase();
    // Two more steps, so the migrators race over several: a table (created twice it would fail)
    // and a no-transaction step with CREATE INDEX CONCURRENTLY (which fails inside a transaction).
    const source = sourceWithSteps({
      [stepFile(NEXT, 'probe')]: 'CREATE TABLE workhorse.migration_probe (id integer PRIMARY KEY);\nINSERT INTO workhorse.migration_probe VALUES (6);',
      [stepFile(AFTER, 'probe_index')]:
        '-- workhorse:no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS migration_probe_id ON workhorse.migration_probe (id);',
    });
    const migrators = Array.from({ length: 5 }, () => {
      const pool = poolFor(db.url, 2);
      pools.push(pool);
      return pool;
    });
    const results = await Promise.all(migrators.map((pool) => migrateWith(pool, source)));
    // A migrator whose connection came late may find some or all steps done: it starts from there.
    expect(results.every((r) => r.from !== null && r.from >= BASELINE_VERSION && r.to === AFTER && !r.created)).toBe(true);
    expect(results.some((r) => r.from === BASELINE_VERSION)).toBe(true);
    // Every step by exactly one migrator, the no-transaction one too (its lock is held on a second connection).
    const applied = results.flatMap((r) => r.applied);
    for (const version of [...allSteps(), NEXT, AFTER]) expect([version, applied.filter((v) => v === version)]).toEqual([version, [version]]);
    expect(await logRows(db.pool)).toEqual([...shippedLog(), { version: NEXT, name: 'probe' }, { version: AFTER, name: 'probe_index' }]);
    expect((await db.pool.query('SELECT id FROM workhorse.migration_probe')).rows).toEqual([{ id: 6 }]);
    const index = await db.pool.query("SELECT indisvalid FROM pg_index WHERE indexrelid = 'workhorse.migration_probe_id'::regclass");
    expect(index.rows).toEqual([{ indisvalid: true }]);
    expect(await installedVersion(db.pool)).toBe(AFTER);
  });

  it('several installers on an empty database: one creates it, the others find it installed', async () => {
    const db = await emptyDatabase();
    const installers = Array.from({ length: 4 }, () => {
      const pool = poolFor(db.url, 1);
      pools.push(pool);
      return pool;
    });
    const results = await Promise.all(installers.map((pool) => installSchema(pool)));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(results.every((r) => r.to === SCHEMA_VERSION && r.applied.length === 0)).toBe(true);
    expect(await logRows(db.pool)).toEqual([{ version: SCHEMA_VERSION, name: 'install' }]);
  });
});

describe('refusals', () => {
  it('a newer database that still serves this release is used as it is, never downgraded', async () => {
    const db = await emptyDatabase();
    await installSchema(db.pool);
    const newer = SCHEMA_VERSION + 1;
    // What the next release's migration leaves when it retires nothing this release calls.
    await db.pool.query('UPDATE workhorse.schema_version SET version = $1', [newer]);
    const before = await workhorseCatalog(db.pool);
    await expect(verifySchema(db.pool)).resolves.toBeUndefined();
    await expect(getSchemaStatus(db.pool)).resolves.toMatchObject({ installed: newer, oldestClient: 4, upToDate: false, compatible: true });
    await expect(installSchema(db.pool)).resolves.toEqual({ created: false, from: newer, to: newer, applied: [] });
    expect(pendingMigrationSteps(newer)).toEqual([]);
    expect(await workhorseCatalog(db.pool)).toEqual(before);
    expect(await installedVersion(db.pool)).toBe(newer);
  });

  it('a newer database that no longer serves this release is refused, with what to do, and nothing changes', async () => {
    const db = await emptyDatabase();
    await installSchema(db.pool);
    const newer = SCHEMA_VERSION + 1;
    // What a migration leaves that retires a function this release calls.
    await db.pool.query('UPDATE workhorse.schema_version SET version = $1', [newer]);
    await db.pool.query(`CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT ${newer} $$`);
    const before = await workhorseCatalog(db.pool);
    const error = await expectRejects(installSchema(db.pool), SchemaVersionMismatchError);
    expect(error).toMatchObject({ installed: newer, expected: SCHEMA_VERSION, minimum: MIN_SCHEMA_VERSION });
    expect(error.message).toMatch(
      new RegExp(`version ${newer}, newer than this package \\(version ${SCHEMA_VERSION}\\), and it no longer serves this release: upgrade the package`),
    );
    await expectRejects(verifySchema(db.pool), SchemaVersionMismatchError);
    await expect(getSchemaStatus(db.pool)).resolves.toMatchObject({ installed: newer, oldestClient: newer, compatible: false });
    expect(await workhorseCatalog(db.pool)).toEqual(before);
    expect(await installedVersion(db.pool)).toBe(newer);
    expect(await logRows(db.pool)).toEqual([{ version: SCHEMA_VERSION, name: 'install' }]);
  });

  it('a version older than the baseline, or a package without a pending step file, is refused before anything runs', async () => {
    const db = await baselineDatabase();
    const before = await workhorseCatalog(db.pool);
    await db.pool.query('UPDATE workhorse.schema_version SET version = 3');
    const old = await expectRejects(installSchema(db.pool), SchemaMigrationError);
    expect(old.message).toMatch(/version 3, older than version 4, the first one that can be migrated/);
    await expect(verifySchema(db.pool)).rejects.toThrow(
      new RegExp(`older than this package needs \\(version ${MIN_SCHEMA_VERSION} to ${SCHEMA_VERSION}\\): run \`npx workhorse schema migrate\``),
    );

    await db.pool.query('UPDATE workhorse.schema_version SET version = 4');
    const lacking = { ...sourceWithSteps({}), target: SCHEMA_VERSION + 1 };
    const missing = await expectRejects(migrateWith(db.pool, lacking), SchemaMigrationError);
    expect(missing).toMatchObject({ version: SCHEMA_VERSION + 1 });
    expect(missing.message).toMatch(new RegExp(`lacks the step file\\(s\\) for version ${SCHEMA_VERSION + 1}`));
    expect(await workhorseCatalog(db.pool)).toEqual(before);
    expect(await installedVersion(db.pool)).toBe(BASELINE_VERSION);
  });

  it('a schema_version without its row is damaged: refused, not polled for ever', async () => {
    const db = await baselineDatabase();
    await db.pool.query('DELETE FROM workhorse.schema_version');
    const error = await expectRejects(installSchema(db.pool), SchemaMigrationError);
    expect(error.message).toMatch(/workhorse\.schema_version has no row, so the installed version is unknown: the schema is damaged/);
  });

  it('a no-transaction step with a one-connection pool is refused before it runs', async () => {
    const db = await emptyDatabase();
    await installSchema(db.pool);
    const source = sourceWithSteps({
      [stepFile(NEXT, 'concurrent')]: '-- workhorse:no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS job_probe ON workhorse.job (created_at);',
    });
    const single = poolFor(db.url, 1);
    pools.push(single);
    const error = await expectRejects(migrateWith(single, source), SchemaMigrationError);
    expect(error.message).toMatch(/needs two connections .* this pool allows one \(max: 1\)/);
    expect(await installedVersion(db.pool)).toBe(SCHEMA_VERSION);
  });

  it('a failing step rolls back whole and leaves the version before it; fixed, it applies', async () => {
    const db = await baselineDatabase();
    const source = sourceWithSteps({
      [stepFile(NEXT, 'broken')]: 'CREATE TABLE workhorse.half_done (id integer);\nSELECT * FROM workhorse.not_there_yet;',
    });
    const error = await expectRejects(migrateWith(db.pool, source), SchemaMigrationError);
    expect(error).toMatchObject({ version: NEXT });
    expect(error.message).toMatch(
      new RegExp(
        `Migration step ${stepFile(NEXT, 'broken')} \\(version ${SCHEMA_VERSION} to ${NEXT}\\) failed: relation "workhorse\\.not_there_yet" does not exist\\. Nothing of this step was applied`,
      ),
    );
    expect(await installedVersion(db.pool)).toBe(SCHEMA_VERSION);
    expect((await db.pool.query("SELECT to_regclass('workhorse.half_done') AS t")).rows).toEqual([{ t: null }]);
    expect(await logRows(db.pool)).toEqual(shippedLog());

    await db.pool.query('CREATE TABLE workhorse.not_there_yet (id integer)');
    await expect(migrateWith(db.pool, source)).resolves.toMatchObject({ from: SCHEMA_VERSION, to: NEXT, applied: [NEXT] });
  });

  it('a no-transaction step interrupted half-way is resumed by the next run', async () => {
    const db = await baselineDatabase();
    const source = sourceWithSteps({
      [stepFile(NEXT, 'concurrent')]: [
        '-- workhorse:no-transaction',
        'CREATE INDEX CONCURRENTLY IF NOT EXISTS job_created_probe ON workhorse.job (created_at);',
        'SELECT * FROM workhorse.appears_later;',
      ].join('\n'),
    });
    const error = await expectRejects(migrateWith(db.pool, source), SchemaMigrationError);
    expect(error.message).toMatch(/may have been applied; the step is resumable/);
    expect(await installedVersion(db.pool)).toBe(SCHEMA_VERSION);
    await db.pool.query('CREATE TABLE workhorse.appears_later (id integer)');
    await expect(migrateWith(db.pool, source)).resolves.toMatchObject({ from: SCHEMA_VERSION, to: NEXT, applied: [NEXT] });
    expect(await logRows(db.pool)).toEqual([...shippedLog(), { version: NEXT, name: 'concurrent' }]);
  });
});

describe("docs/upgrading.md's no-transaction step", () => {
  it('replaces an INVALID index an interrupted run left, and runs again harmlessly', async () => {
    const [example] = fencedBlocks(ROOT, 'docs/upgrading.md').filter((block) => block.language === 'sql');
    expect(example.code.split('\n')[0]).toBe('-- workhorse:no-transaction');
    const db = await baselineDatabase();
    const source = sourceWithSteps({ [stepFile(NEXT, 'lease_index')]: example.code });
    expect(source.steps().at(-1)).toMatchObject({ version: NEXT, transactional: false });
    // What an interrupted CREATE INDEX CONCURRENTLY leaves: the index, marked invalid.
    await db.pool.query('CREATE INDEX job_runtime_lease_idx ON workhorse.job_runtime (lease_expires_at)');
    await db.pool.query("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'workhorse.job_runtime_lease_idx'::regclass");
    await expect(migrateWith(db.pool, source)).resolves.toMatchObject({ from: BASELINE_VERSION, to: NEXT, applied: [...allSteps(), NEXT] });
    const valid = () => db.pool.query("SELECT indisvalid FROM pg_index WHERE indexrelid = 'workhorse.job_runtime_lease_idx'::regclass");
    expect((await valid()).rows).toEqual([{ indisvalid: true }]);
    // Run again from scratch (as a second migrator that lost the race would): nothing breaks.
    const client = await db.pool.connect();
    try {
      for (const statement of splitStatements(example.code)) await client.query(statement);
    } finally {
      client.release();
    }
    expect((await valid()).rows).toEqual([{ indisvalid: true }]);
  });
});

describe('the migration lock and application roles', () => {
  it('a producer or worker role can neither take the lock, nor migrate, nor block a migration', async () => {
    const db = await baselineDatabase();
    const producer = await roles.create(db.url, 'wh_mig_producer');
    const worker = await roles.create(db.url, 'wh_mig_worker');
    await grantRole(db.pool, producer.name, 'producer');
    await grantRole(db.pool, worker.name, 'worker');

    for (const role of [producer, worker]) {
      const client = await clientFor(role.url);
      try {
        // It reads the version (clients check it), and that is all.
        expect((await client.query('SELECT version FROM workhorse.schema_version')).rows).toEqual([{ version: BASELINE_VERSION }]);
        for (const lock of ['FOR UPDATE', 'FOR NO KEY UPDATE', 'FOR SHARE', 'FOR KEY SHARE']) {
          expect([lock, await sqlstateOf(client, `SELECT version FROM workhorse.schema_version ${lock}`)]).toEqual([lock, '42501']);
        }
        for (const mode of ['ROW SHARE', 'ROW EXCLUSIVE', 'SHARE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE']) {
          await client.query('BEGIN');
          expect([mode, await sqlstateOf(client, `LOCK TABLE workhorse.schema_version IN ${mode} MODE`)]).toEqual([mode, '42501']);
          await client.query('ROLLBACK');
        }
        expect(await sqlstateOf(client, 'UPDATE workhorse.schema_version SET version = 5')).toBe('42501');
      } finally {
        await client.end();
      }
      const rolePool = poolFor(role.url, 1);
      pools.push(rolePool);
      const refused = await expectRejects(installSchema(rolePool), SchemaMigrationError);
      expect(refused.roleRefused).toBe(true);
      expect(refused.message).toMatch(new RegExp(`Cannot migrate the workhorse schema to version ${BASELINE_VERSION + 1} as this role: .*Run the migration as the schema's owner`));
    }
    expect(await installedVersion(db.pool)).toBe(BASELINE_VERSION);

    // The most an application role can hold: a read of schema_version in an open transaction
    // (ACCESS SHARE) and the fresh-install advisory lock. Neither stops the migration.
    const holder = await clientFor(worker.url);
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE workhorse.schema_version IN ACCESS SHARE MODE');
      await holder.query('SELECT version FROM workhorse.schema_version');
      await holder.query('SELECT pg_advisory_lock($1)', [INSTALL_LOCK_KEY]);
      const started = Date.now();
      await expect(installSchema(db.pool)).resolves.toMatchObject({ from: BASELINE_VERSION, applied: allSteps() });
      expect(Date.now() - started).toBeLessThan(10_000);
      // Its open transaction still reads (the old snapshot's row is not locked against reads).
      await expect(holder.query('SELECT version FROM workhorse.schema_version')).resolves.toBeDefined();
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
    expect(await installedVersion(db.pool)).toBe(SCHEMA_VERSION);
  });
});

describe('roles granted before an upgrade', () => {
  it('get the protocol functions a step adds for their capabilities, without granting again', async () => {
    const db = await baselineDatabase();
    const producer = await roles.create(db.url, 'wh_mig_regrant_producer');
    const worker = await roles.create(db.url, 'wh_mig_regrant_worker');
    // Granted on the baseline, which records nothing: the step to version 6 infers the grants.
    await grantRole(db.pool, producer.name, 'producer');
    await grantRole(db.pool, worker.name, 'worker');
    const probe = NEXT;
    const source = sourceWithSteps({
      [stepFile(probe, 'probe')]: [
        'CREATE FUNCTION workhorse.probe_v1() RETURNS integer LANGUAGE sql AS $$ SELECT 42 $$;',
        'REVOKE ALL ON FUNCTION workhorse.probe_v1() FROM PUBLIC;',
        'ALTER FUNCTION workhorse.probe_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;',
        "INSERT INTO workhorse.protocol_function (name, capabilities) VALUES ('probe_v1', '{worker}');",
        'SELECT workhorse.regrant_capabilities();',
      ].join('\n'),
    });
    await expect(migrateWith(db.pool, source)).resolves.toMatchObject({ from: BASELINE_VERSION, to: probe });
    const { rows } = await db.pool.query<{ role: string; capability: string }>(
      `SELECT r.rolname AS role, c.capability FROM workhorse.role_capability c JOIN pg_roles r ON r.oid = c.role_oid
       WHERE r.rolname = ANY ($1) ORDER BY 1, 2`,
      [[producer.name, worker.name]],
    );
    expect(rows).toEqual([
      { role: producer.name, capability: 'producer' },
      { role: worker.name, capability: 'worker' },
    ]);
    for (const [role, expected] of [
      [worker, '42'],
      [producer, '42501'],
    ] as const) {
      const client = await clientFor(role.url);
      try {
        // Granted by the step to version 6 itself, to the roles it recorded.
        expect((await client.query('SELECT workhorse.oldest_client_v1() AS v')).rows).toEqual([{ v: 4 }]);
        expect(await sqlstateOf(client, 'SELECT workhorse.regrant_capabilities()')).toBe('42501');
        if (expected === '42') expect((await client.query('SELECT workhorse.probe_v1() AS v')).rows).toEqual([{ v: 42 }]);
        else expect(await sqlstateOf(client, 'SELECT workhorse.probe_v1()')).toBe(expected);
      } finally {
        await client.end();
      }
    }
  });

  it('a role granted after the upgrade is recorded by grantRole itself', async () => {
    const db = await emptyDatabase();
    await installSchema(db.pool);
    const operator = await roles.create(db.url, 'wh_mig_regrant_operator');
    await grantRole(db.pool, operator.name, ['operator']);
    await grantRole(db.pool, operator.name, ['operator']);
    const { rows } = await db.pool.query(
      'SELECT c.capability FROM workhorse.role_capability c JOIN pg_roles r ON r.oid = c.role_oid WHERE r.rolname = $1',
      [operator.name],
    );
    expect(rows).toEqual([{ capability: 'operator' }]);
    await expect(db.pool.query('SELECT workhorse.regrant_capabilities() AS n')).resolves.toMatchObject({ rows: [{ n: 0 }] });
  });
});
