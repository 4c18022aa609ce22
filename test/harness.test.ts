import { Client } from 'pg';
import { adminUrl, createTestDatabase, type TestDatabase, withAdminClient, withTestDatabase } from './support/db';

async function databaseExists(name: string): Promise<boolean> {
  return withAdminClient(async (client) => {
    const result = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    return result.rowCount === 1;
  });
}

describe('test harness', () => {
  it('reaches a PostgreSQL server as a superuser', async () => {
    const url = adminUrl();
    expect(url).toMatch(/^postgres(ql)?:\/\//);
    await withAdminClient(async (client) => {
      const result = await client.query<{ superuser: boolean; version: number }>(
        "SELECT current_setting('is_superuser') = 'on' AS superuser, current_setting('server_version_num')::int AS version",
      );
      expect(result.rows[0].superuser).toBe(true);
      expect(result.rows[0].version).toBeGreaterThanOrEqual(150000);
    });
  });

  it('gives every call its own fresh database with the workhorse schema installed', async () => {
    const databases: TestDatabase[] = [];
    try {
      databases.push(await createTestDatabase(), await createTestDatabase());
      const [a, b] = databases;
      expect(a.name).not.toBe(b.name);
      expect(a.name).toMatch(/^wh_test_[0-9a-f]+$/);

      for (const db of databases) {
        const current = await db.pool.query<{ name: string }>('SELECT current_database() AS name');
        expect(current.rows[0].name).toBe(db.name);
        const version = await db.pool.query<{ version: number }>('SELECT version FROM workhorse.schema_version');
        expect(version.rowCount).toBe(1);
        expect(version.rows[0].version).toBeGreaterThanOrEqual(1);
      }

      // Fresh means isolated: what one test writes, another test's database does not see.
      await a.pool.query('CREATE TABLE public.only_in_a (id int)');
      const inB = await b.pool.query("SELECT to_regclass('public.only_in_a') IS NOT NULL AS present");
      expect(inB.rows[0].present).toBe(false);
    } finally {
      await Promise.all(databases.map((db) => db.drop()));
    }
  });

  it('drop() removes the database, even with other connections still open to it', async () => {
    const db = await createTestDatabase();
    const straggler = new Client({ connectionString: db.url });
    straggler.on('error', () => undefined); // DROP ... WITH (FORCE) terminates it
    await straggler.connect();
    try {
      expect(await databaseExists(db.name)).toBe(true);
      await db.drop();
      expect(await databaseExists(db.name)).toBe(false);
      await db.drop(); // a second call is harmless
    } finally {
      await straggler.end().catch(() => undefined);
    }
  });

  it('withTestDatabase() drops its database when the work throws', async () => {
    let name = '';
    await expect(
      withTestDatabase(async (db) => {
        name = db.name;
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(name).not.toBe('');
    expect(await databaseExists(name)).toBe(false);
  });
});
