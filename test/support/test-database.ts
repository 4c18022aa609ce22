/**
 * The database test bed of a test file (or of one describe block): a fresh database with the
 * schema for its tests, the split and attempt-history invariants checked after each test, and
 * after the last one everything the bed opened closed and the database and its roles dropped.
 */
import type { Pool } from 'pg';
import { Admin, Queue } from '../../lib/core';
import { planTestDatabase, type CreateTestDatabaseOptions, type TestDatabase } from './db';
import { expectSplitInvariant } from './invariants';
import { LoginRoles } from './roles';

export interface TestDatabaseBed {
  /** The database; it exists inside the tests and the hooks declared after the bed (see `scope`). */
  db: TestDatabase;
  /** `db.url`. */
  url: string;
  /** `db.pool`. */
  pool: Pool;
  queue: Queue;
  admin: Admin;
  /** Login roles for privilege tests; dropped after the database (roles are cluster-wide). */
  roles: LoginRoles;
}

export interface TestDatabaseOptions extends CreateTestDatabaseOptions {
  /**
   * `'file'` (default): one database for all the tests of the file or describe block; `'test'`: a
   * new one for each test (same name, URL and pool), for tests that read the whole database.
   */
  scope?: 'file' | 'test';
  /** Check `expectSplitInvariant` after each test (default true). */
  checkInvariants?: boolean;
  /**
   * Runs after each test, before the invariant check: stops what the test started, and checks
   * what the file checks after every test.
   */
  afterEachTest?: () => Promise<unknown> | undefined;
  /**
   * Runs after the last test, before the drop, also when a `beforeAll` failed half-way: closes
   * what the file opened on the database (workers, processes, servers, other pools). `created`
   * says whether the database exists (it was made and not yet discarded).
   */
  beforeDrop?: (created: boolean) => Promise<unknown> | undefined;
}

/**
 * Registers the hooks of a database test bed in the calling file or describe block and returns
 * it. Its objects exist at once (the pool connects on its first query), so a file can take them
 * apart at the top; the database behind them exists inside the tests and the hooks declared
 * after this call. A file's own set-up (tables, seed rows) goes in a `beforeAll` declared after.
 *
 * @example
 * const { pool, queue, admin } = useTestDatabase({ afterEachTest: stopWorkers });
 */
export function useTestDatabase(options: TestDatabaseOptions = {}): TestDatabaseBed {
  const { scope = 'file', checkInvariants = true, afterEachTest, beforeDrop, ...database } = options;
  const { create, discard, ...db } = planTestDatabase(database);
  const bed: TestDatabaseBed = {
    db,
    url: db.url,
    pool: db.pool,
    queue: new Queue(db.pool),
    admin: new Admin(db.pool),
    roles: new LoginRoles(),
  };
  let created = false;

  (scope === 'test' ? beforeEach : beforeAll)(async () => {
    await create();
    created = true;
  });
  if (checkInvariants || afterEachTest || scope === 'test') {
    afterEach(async () => {
      try {
        await afterEachTest?.();
        if (checkInvariants && created) await expectSplitInvariant(db.pool);
      } finally {
        if (scope === 'test') {
          created = false;
          await discard();
        }
      }
    });
  }
  afterAll(async () => {
    try {
      await beforeDrop?.(created);
    } finally {
      try {
        await db.drop();
      } finally {
        await bed.roles.dropAll();
      }
    }
  });
  return bed;
}
