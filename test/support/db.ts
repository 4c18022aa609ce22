/**
 * Fresh databases for tests: each createTestDatabase() call creates a new, uniquely named
 * database on the test server, installs the workhorse schema in it and hands back a pool.
 */
import { randomBytes } from 'node:crypto';
import { Client, Pool, type PoolConfig } from 'pg';
import { installSchema } from '../../lib/core/schema';
import { DATABASE_URL_ENV } from './test-server';

export interface TestDatabase {
  /** Connection URL of this database. */
  url: string;
  /** The database's name, `wh_test_<random>`. */
  name: string;
  /** A pool (max 20) on this database, with the schema installed. */
  pool: Pool;
  /** Ends the pool and drops the database, closing any other connections to it. */
  drop(): Promise<void>;
}

export interface CreateTestDatabaseOptions {
  /** Install the workhorse schema (default true). */
  installSchema?: boolean;
  /** Extra pool settings; the connection string is always this database's. */
  pool?: Omit<PoolConfig, 'connectionString'>;
}

/** The superuser URL of the test server's `postgres` database. */
export function adminUrl(): string {
  const url = process.env[DATABASE_URL_ENV];
  if (!url) {
    throw new Error(
      `${DATABASE_URL_ENV} is not set. Run the tests with \`npm test\` (Jest's global setup starts ` +
        'an embedded PostgreSQL server and sets it), or set it to the URL of a PostgreSQL superuser.',
    );
  }
  return url;
}

/** The URL of `database` on the test server. */
export function databaseUrl(database: string): string {
  const url = new URL(adminUrl());
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString();
}

/** Runs `work` with a connected client on the admin database, then closes it. */
export async function withAdminClient<T>(work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: adminUrl() });
  client.on('error', () => undefined); // errors surface through the awaited queries
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A test database that does not exist yet: its name, URL and pool are fixed, `create()` makes it. */
export interface PlannedTestDatabase extends TestDatabase {
  /** Creates the database and installs the schema (unless told otherwise); drops it again if that fails. */
  create(): Promise<void>;
  /** Drops the database but keeps the pool, so that `create()` can make it afresh under the same name. */
  discard(): Promise<void>;
}

/**
 * Names a fresh database and builds its pool without touching the server (the pool connects on
 * its first query), so that a test file can hold the pool from the start and create the database
 * in a hook. `drop()` is safe before `create()` and after a failed one.
 */
export function planTestDatabase(options: CreateTestDatabaseOptions = {}): PlannedTestDatabase {
  const name = `wh_test_${randomBytes(8).toString('hex')}`;
  const url = databaseUrl(name);
  const pool = new Pool({ max: 20, ...options.pool, connectionString: url });
  // An idle client whose connection dies (e.g. the database being dropped) must not crash the
  // test process; the tests see such failures through their own queries.
  pool.on('error', () => undefined);

  const dropDatabase = (): Promise<unknown> =>
    withAdminClient((client) => client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`));

  let dropped: Promise<void> | undefined;
  const drop = (): Promise<void> => {
    dropped ??= (async () => {
      try {
        await pool.end();
      } finally {
        await dropDatabase();
      }
    })();
    return dropped;
  };

  const discard = async (): Promise<void> => {
    // The idle connections go first: one the drop killed would fail the first query of whatever
    // the pool hands it to next, instead of being replaced by a connection to the new database.
    const idle = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
    for (const client of idle) client.release(true);
    await dropDatabase();
  };

  const create = async (): Promise<void> => {
    await withAdminClient((client) => client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`));
    if (options.installSchema ?? true) {
      try {
        await installSchema(pool);
      } catch (error) {
        await discard().catch(() => undefined);
        throw error;
      }
    }
  };
  return { url, name, pool, drop, create, discard };
}

/** Creates a fresh database with the workhorse schema installed (unless told otherwise). */
export async function createTestDatabase(options: CreateTestDatabaseOptions = {}): Promise<TestDatabase> {
  const { create, discard, ...db } = planTestDatabase(options);
  try {
    await create();
  } catch (error) {
    await db.drop().catch(() => undefined);
    throw error;
  }
  return db;
}

/** Runs `work` against a fresh database and drops the database afterwards, whatever happens. */
export async function withTestDatabase<T>(
  work: (db: TestDatabase) => Promise<T>,
  options?: CreateTestDatabaseOptions,
): Promise<T> {
  const db = await createTestDatabase(options);
  try {
    return await work(db);
  } finally {
    await db.drop();
  }
}

let queueCounter = 0;

/**
 * A queue name no earlier call in this test file gave out (`queue-1`, `queue-2`, ...). Each test
 * that takes one works on a queue of its own, so a job one test leaves behind never reaches
 * another test's worker.
 */
export function freshQueue(): string {
  queueCounter += 1;
  return `queue-${queueCounter}`;
}
