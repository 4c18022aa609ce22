import type { Pool } from 'pg';
import {
  Admin,
  getSchemaStatus,
  installSchema,
  Queue,
  MIN_SCHEMA_VERSION,
  SCHEMA_VERSION,
  SchemaNotInstalledError,
  SchemaVersionMismatchError,
  verifySchema,
} from '../../lib/core';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { expectSplitInvariant } from '../support/invariants';
import { useTestDatabase } from '../support/test-database';

const TABLES = [
  'schema_version',
  'job',
  'job_runtime',
  'job_outcome',
  'job_query',
  'job_checkpoint',
  'job_event',
  'attempt_history',
  'job_event_default',
  'attempt_history_default',
  'schedule',
  'schedule_occurrence',
  'schedule_history',
  'handler_policy',
  'job_signal',
  'job_signal_wait',
  'job_human_wait',
];

const FUNCTIONS = [
  'enqueue_many_v1',
  'claim_many_v1',
  'heartbeat_many_v1',
  'complete_many_v1',
  'complete_v1',
  'fail_v1',
  'release_v1',
  'cancel_v1',
  'acknowledge_cancel_v1',
  'save_checkpoint_v1',
  'read_checkpoints_v1',
  'promote_v1',
  'recover_expired_v1',
  'tick_v1',
  'register_handlers_v1',
  'prepare_partitions_v1',
  'drop_history_before_v1',
  'get_job_v1',
  'list_jobs_v1',
  'get_timeline_v1',
  'wait_signal_v1',
  'send_signal_v1',
  'wait_human_v1',
  'complete_human_wait_v1',
  'list_human_waits_v1',
  'sync_schedules_v1',
  'schedules_to_plan_v1',
  'plan_schedule_v1',
  'pause_schedule_v1',
  'resume_schedule_v1',
  'trigger_schedule_v1',
  'list_schedules_v1',
  'get_schedule_history_v1',
];

/** Every object of the workhorse schema with its definition, to prove a call changed nothing. */
async function catalog(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ item: string }>(`
    SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || c.oid AS item
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'workhorse'
    UNION ALL
    SELECT 'fn ' || p.proname || ' ' || p.oid || ' ' || md5(p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'workhorse'
    UNION ALL
    SELECT 'version ' || version || ' ' || installed_at FROM workhorse.schema_version
    ORDER BY 1`);
  return rows.map((r) => r.item);
}

async function schemaExists(pool: Pool): Promise<boolean> {
  const { rows } = await pool.query<{ present: boolean }>(
    "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'workhorse') AS present",
  );
  return rows[0].present;
}

function ymd(day: Date): string {
  return day.toISOString().slice(0, 10).replace(/-/g, '');
}

function addDays(day: Date, days: number): Date {
  return new Date(day.getTime() + days * 86_400_000);
}

describe('schema', () => {
  // Databases this file creates beyond the shared one; dropped before it whatever happens.
  const extra: TestDatabase[] = [];
  const { db } = useTestDatabase({ beforeDrop: () => Promise.all(extra.map((d) => d.drop())) });

  async function freshDatabase(install: boolean): Promise<TestDatabase> {
    const created = await createTestDatabase({ installSchema: install });
    extra.push(created);
    return created;
  }

  describe('installSchema', () => {
    it('creates the schema, its tables and functions on a fresh database', async () => {
      const fresh = await freshDatabase(false);
      expect(await schemaExists(fresh.pool)).toBe(false);
      expect(await getSchemaStatus(fresh.pool)).toEqual({
        installed: null,
        expected: SCHEMA_VERSION,
        minimum: MIN_SCHEMA_VERSION,
        oldestClient: null,
        upToDate: false,
        compatible: false,
      });

      // It says that it created the schema.
      await expect(installSchema(fresh.pool)).resolves.toEqual({ created: true, from: null, to: SCHEMA_VERSION, applied: [] });

      expect(await getSchemaStatus(fresh.pool)).toEqual({
      installed: SCHEMA_VERSION,
      expected: SCHEMA_VERSION,
      minimum: MIN_SCHEMA_VERSION,
      oldestClient: 4,
      upToDate: true,
      compatible: true,
    });
      await expect(verifySchema(fresh.pool)).resolves.toBeUndefined();
      const tables = await fresh.pool.query<{ name: string; present: boolean }>(
        "SELECT t AS name, to_regclass('workhorse.' || t) IS NOT NULL AS present FROM unnest($1::text[]) AS t",
        [TABLES],
      );
      expect(tables.rows.filter((t) => !t.present).map((t) => t.name)).toEqual([]);
      const functions = await fresh.pool.query<{ proname: string }>(
        "SELECT DISTINCT proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'workhorse'",
      );
      expect(functions.rows.map((f) => f.proname)).toEqual(expect.arrayContaining(FUNCTIONS));

      // The installed schema works: a job can be enqueued and read.
      await new Queue(fresh.pool).enqueue('schema.smoke', { ok: true });
      expect(await fresh.pool.query('SELECT 1 FROM workhorse.job')).toMatchObject({ rowCount: 1 });
      await expectSplitInvariant(fresh.pool);
    });

    it('does nothing when called again for the same version', async () => {
      const id = await new Queue(db.pool).enqueue('schema.again', { keep: true });
      const before = await catalog(db.pool);
      await expect(installSchema(db.pool)).resolves.toEqual({ created: false, from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
      await expect(installSchema(db.pool)).resolves.toEqual({ created: false, from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
      expect(await catalog(db.pool)).toEqual(before);
      const kept = await db.pool.query('SELECT payload FROM workhorse.job WHERE id = $1', [id]);
      expect(kept.rows).toEqual([{ payload: { keep: true } }]);
    });

    it('lets 5 concurrent installers on a fresh database all succeed, with one schema_version row', async () => {
      const fresh = await freshDatabase(false);
      const results = await Promise.allSettled(Array.from({ length: 5 }, () => installSchema(fresh.pool)));
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      // Exactly one of them created it.
      const created = results.map((r) => r.status === 'fulfilled' && r.value.created);
      expect(created.filter(Boolean)).toHaveLength(1);
      const versions = await fresh.pool.query('SELECT version FROM workhorse.schema_version');
      expect(versions.rows).toEqual([{ version: SCHEMA_VERSION }]);
      await expect(verifySchema(fresh.pool)).resolves.toBeUndefined();
      // Installed once: one set of functions, not five.
      const counts = await fresh.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'workhorse' AND p.proname = 'enqueue_many_v1'`,
      );
      expect(counts.rows[0].n).toBe(1);
    });

    it('refuses a database that holds a newer schema version no longer serving it, says what to do, and changes nothing', async () => {
      const other = await freshDatabase(true);
      const id = await new Queue(other.pool).enqueue('schema.mismatch', { keep: 1 });
      const installed = SCHEMA_VERSION + 41;
      await other.pool.query('UPDATE workhorse.schema_version SET version = $1', [installed]);
      await other.pool.query(`CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE sql STABLE AS $$ SELECT ${installed} $$`);
      const before = await catalog(other.pool);

      for (const call of [installSchema, verifySchema]) {
        const error = await call(other.pool).then(
          () => new Error('accepted'),
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(SchemaVersionMismatchError);
        const mismatch = error as SchemaVersionMismatchError;
        expect(mismatch).toMatchObject({ installed, expected: SCHEMA_VERSION });
        expect(mismatch.message).toContain(`version ${installed}`);
        expect(mismatch.message).toContain(`version ${SCHEMA_VERSION}`);
        // The way out: a newer package. Never a downgrade, never a drop.
        expect(mismatch.message).toMatch(/newer than this package .*upgrade the package/);
        expect(mismatch.message).not.toContain('DROP SCHEMA');
      }

      expect(await catalog(other.pool)).toEqual(before);
      expect(await getSchemaStatus(other.pool)).toEqual({
        installed,
        expected: SCHEMA_VERSION,
        minimum: MIN_SCHEMA_VERSION,
        oldestClient: installed,
        upToDate: false,
        compatible: false,
      });
      const kept = await other.pool.query('SELECT payload FROM workhorse.job WHERE id = $1', [id]);
      expect(kept.rows).toEqual([{ payload: { keep: 1 } }]);
    });

    it('verifySchema on an empty database throws SchemaNotInstalledError and installs nothing', async () => {
      const empty = await freshDatabase(false);
      const error = await verifySchema(empty.pool).then(
        () => new Error('accepted'),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SchemaNotInstalledError);
      expect(error).toMatchObject({ expected: SCHEMA_VERSION });
      expect((error as Error).message).toMatch(/installSchema|schema install/);
      expect(await schemaExists(empty.pool)).toBe(false);
    });

    it('Queue and Admin on a database without the schema throw SchemaNotInstalledError, which says what to run', async () => {
      const empty = await freshDatabase(false);
      const queue = new Queue(empty.pool);
      const admin = new Admin(empty.pool);
      const jobId = '01a22858-3d78-7624-95c6-4dc3ae0605a2';
      const calls: [string, () => Promise<unknown>][] = [
        ['Queue.enqueue', () => queue.enqueue('email.send', { to: 'ada@example.com' })],
        ['Queue.enqueueMany', () => queue.enqueueMany([{ type: 'email.send', payload: {} }])],
        ['Queue.getJob', () => queue.getJob(jobId)],
        ['Admin.getJob', () => admin.getJob(jobId)],
        ['Admin.getJobTimeline', () => admin.getJobTimeline(jobId)],
        ['Admin.listJobs', () => admin.listJobs()],
        ['Admin.cancel', () => admin.cancel(jobId)],
        ['Admin.listQueues', () => admin.listQueues()],
        ['Admin.listDeadLetters', () => admin.listDeadLetters()],
      ];
      for (const [name, call] of calls) {
        const error = await call().then(
          () => new Error(`${name} succeeded`),
          (e: unknown) => e,
        );
        expect([name, error]).toEqual([name, expect.any(SchemaNotInstalledError)]);
        expect(error).toMatchObject({ expected: SCHEMA_VERSION });
        expect((error as Error).message).toContain('Run `npx workhorse schema migrate` or call installSchema(pool) once');
      }
      // Inside the caller's own transaction too (which the failed statement has aborted).
      const client = await empty.pool.connect();
      try {
        await client.query('BEGIN');
        await expect(queue.enqueue('email.send', {}, {}, client)).rejects.toBeInstanceOf(SchemaNotInstalledError);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      expect(await schemaExists(empty.pool)).toBe(false);
    });

    it('getSchemaStatus reads without writing', async () => {
      const status = await getSchemaStatus(db.pool);
      expect(status).toEqual({
        installed: SCHEMA_VERSION,
        expected: SCHEMA_VERSION,
        minimum: MIN_SCHEMA_VERSION,
        oldestClient: 4,
        upToDate: true,
        compatible: true,
      });
      // A read-only transaction would refuse any write.
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN READ ONLY');
        expect(await getSchemaStatus(client)).toEqual(status);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    });
  });

  describe('history partitions', () => {
    /** The UTC day the schema was installed: the day install prepared partitions from. */
    async function installDay(): Promise<Date> {
      const { rows } = await db.pool.query<{ day: string }>(
        "SELECT to_char((installed_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day FROM workhorse.schema_version",
      );
      return new Date(`${rows[0].day}T00:00:00Z`);
    }

    async function today(): Promise<Date> {
      const { rows } = await db.pool.query<{ day: string }>(
        "SELECT to_char((clock_timestamp() AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') AS day",
      );
      return new Date(`${rows[0].day}T00:00:00Z`);
    }

    async function partitions(): Promise<string[]> {
      const { rows } = await db.pool.query<{ name: string }>(`
        SELECT c.relname AS name
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class p ON p.oid = i.inhparent
        JOIN pg_namespace n ON n.oid = p.relnamespace
        WHERE n.nspname = 'workhorse' AND p.relname IN ('job_event', 'attempt_history')
        ORDER BY 1`);
      return rows.map((r) => r.name);
    }

    /** The partition a job_event row with this timestamp is stored in. */
    async function eventPartitionOf(at: Date): Promise<string> {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query<{ part: string }>(
          `INSERT INTO workhorse.job_event (job_id, at, kind) VALUES (gen_random_uuid(), $1, 'probe')
           RETURNING tableoid::regclass::text AS part`,
          [at],
        );
        return rows[0].part;
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    }

    it("creates today's and the next 7 days' partitions (UTC) for both history tables", async () => {
      const first = await installDay();
      const names = await partitions();
      for (let d = 0; d <= 7; d++) {
        const day = ymd(addDays(first, d));
        expect(names).toContain(`job_event_p${day}`);
        expect(names).toContain(`attempt_history_p${day}`);
      }
      expect(names).toContain('job_event_default');
      expect(names).toContain('attempt_history_default');
    });

    it('bounds each partition by the UTC day', async () => {
      const first = await installDay();
      const day = addDays(first, 3);
      expect(await eventPartitionOf(day)).toBe(`workhorse.job_event_p${ymd(day)}`);
      expect(await eventPartitionOf(new Date(addDays(day, 1).getTime() - 1))).toBe(`workhorse.job_event_p${ymd(day)}`);
      expect(await eventPartitionOf(addDays(day, 1))).toBe(`workhorse.job_event_p${ymd(addDays(day, 1))}`);
      // Expressed in another zone, the same instant still lands in the UTC day.
      const { rows } = await db.pool.query<{ part: string }>(
        `WITH ins AS (INSERT INTO workhorse.job_event (job_id, at, kind)
                      VALUES (gen_random_uuid(), $1::timestamptz, 'probe') RETURNING tableoid::regclass::text AS part, id)
         SELECT part FROM ins`,
        [`${day.toISOString().slice(0, 10)} 23:30:00-05`],
      );
      expect(rows[0].part).toBe(`workhorse.job_event_p${ymd(addDays(day, 1))}`);
      await db.pool.query("DELETE FROM workhorse.job_event WHERE kind = 'probe'");
    });

    it('prepare_partitions_v1 is idempotent', async () => {
      const before = await partitions();
      const first = await db.pool.query<{ created: number }>('SELECT workhorse.prepare_partitions_v1(7) AS created');
      expect(first.rows[0].created).toBe(0);
      expect(await partitions()).toEqual(before);

      // Reaching further creates the missing days once; asking again creates nothing.
      const start = await today();
      const wider = await db.pool.query<{ created: number }>('SELECT workhorse.prepare_partitions_v1(9) AS created');
      expect(wider.rows[0].created).toBeGreaterThanOrEqual(2);
      const again = await db.pool.query<{ created: number }>('SELECT workhorse.prepare_partitions_v1(9) AS created');
      expect(again.rows[0].created).toBe(0);
      const names = await partitions();
      for (const d of [8, 9]) {
        expect(names).toContain(`job_event_p${ymd(addDays(start, d))}`);
        expect(names).toContain(`attempt_history_p${ymd(addDays(start, d))}`);
      }
      expect(names.length).toBe(before.length + wider.rows[0].created);
    });

    it('moves rows that fell into the default partition into the day partition it creates', async () => {
      const day = addDays(await today(), 5);
      const eventPart = `job_event_p${ymd(day)}`;
      const attemptPart = `attempt_history_p${ymd(day)}`;
      // A database where preparation fell behind: that day has no partition.
      await db.pool.query(`DROP TABLE workhorse.${eventPart}`);
      await db.pool.query(`DROP TABLE workhorse.${attemptPart}`);

      const noon = new Date(day.getTime() + 12 * 3_600_000);
      const events = await db.pool.query<{ id: string; part: string }>(
        `INSERT INTO workhorse.job_event (job_id, at, kind, data)
         SELECT gen_random_uuid(), $1::timestamptz + g * interval '1 minute', 'stray', jsonb_build_object('g', g)
         FROM generate_series(1, 3) AS g
         RETURNING id::text, tableoid::regclass::text AS part`,
        [noon],
      );
      expect(events.rows.map((r) => r.part)).toEqual(Array(3).fill('workhorse.job_event_default'));
      const attempts = await db.pool.query<{ id: string; part: string }>(
        `INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at)
         VALUES (gen_random_uuid(), 1, 'succeeded', 'w', 1, $1, $1)
         RETURNING id::text, tableoid::regclass::text AS part`,
        [noon],
      );
      expect(attempts.rows[0].part).toBe('workhorse.attempt_history_default');

      const created = await db.pool.query<{ created: number }>('SELECT workhorse.prepare_partitions_v1(7) AS created');
      expect(created.rows[0].created).toBe(2);

      const movedEvents = await db.pool.query<{ id: string; part: string; data: { g: number } }>(
        "SELECT id::text, tableoid::regclass::text AS part, data FROM workhorse.job_event WHERE kind = 'stray' ORDER BY id",
      );
      expect(movedEvents.rows).toEqual(
        events.rows.map((r, i) => ({ id: r.id, part: `workhorse.${eventPart}`, data: { g: i + 1 } })),
      );
      const movedAttempts = await db.pool.query<{ id: string; part: string }>(
        'SELECT id::text, tableoid::regclass::text AS part FROM workhorse.attempt_history WHERE id = $1',
        [attempts.rows[0].id],
      );
      expect(movedAttempts.rows).toEqual([{ id: attempts.rows[0].id, part: `workhorse.${attemptPart}` }]);
      const leftInDefault = await db.pool.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM workhorse.job_event_default WHERE kind = 'stray')::int
              + (SELECT count(*) FROM workhorse.attempt_history_default WHERE id = $1)::int AS n`,
        [attempts.rows[0].id],
      );
      expect(leftInDefault.rows[0].n).toBe(0);
      // The new partitions are real partitions: later rows for that day go straight there.
      expect(await eventPartitionOf(noon)).toBe(`workhorse.${eventPart}`);

      await db.pool.query("DELETE FROM workhorse.job_event WHERE kind = 'stray'");
      await db.pool.query('DELETE FROM workhorse.attempt_history WHERE id = $1', [attempts.rows[0].id]);
    });

    it('drop_history_before_v1 drops the old days and keeps the newer ones', async () => {
      const now = await today();
      const old = [3, 2, 1].map((d) => addDays(now, -d));
      for (const day of old) {
        for (const table of ['job_event', 'attempt_history']) {
          await db.pool.query(
            `CREATE TABLE workhorse.${table}_p${ymd(day)} PARTITION OF workhorse.${table}
             FOR VALUES FROM ('${day.toISOString()}') TO ('${addDays(day, 1).toISOString()}')`,
          );
        }
        await db.pool.query(
          "INSERT INTO workhorse.job_event (job_id, at, kind) VALUES (gen_random_uuid(), $1::timestamptz + interval '1 hour', 'old')",
          [day],
        );
      }
      // A day long gone with no partition of its own (default partition), and a far future one.
      const ancient = addDays(now, -40);
      const farFuture = addDays(now, 40);
      await db.pool.query(
        `INSERT INTO workhorse.job_event (job_id, at, kind) VALUES (gen_random_uuid(), $1, 'ancient'), (gen_random_uuid(), $2, 'future')`,
        [ancient, farFuture],
      );
      await db.pool.query(
        `INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at)
         VALUES (gen_random_uuid(), 1, 'failed', 'w', 1, $1, $1)`,
        [ancient],
      );
      const before = await partitions();

      // Keep from one day ago on: the two older days go, for both tables. (A cutoff later than
      // the retention floor is refused: the windows are shortened to one day first.)
      const cut = addDays(now, -1);
      await db.pool.query(`SELECT workhorse.set_retention_v1('{"jobEventDays": 1, "attemptHistoryDays": 1}')`);
      const dropped = await db.pool.query<{ n: number }>('SELECT workhorse.drop_history_before_v1($1) AS n', [cut]);
      expect(dropped.rows[0].n).toBe(4);

      const after = await partitions();
      const gone = before.filter((name) => !after.includes(name)).sort();
      expect(gone).toEqual(
        [old[0], old[1]].flatMap((d) => [`attempt_history_p${ymd(d)}`, `job_event_p${ymd(d)}`]).sort(),
      );
      expect(after).toContain(`job_event_p${ymd(old[2])}`);
      expect(after).toContain(`attempt_history_p${ymd(old[2])}`);
      for (let d = 0; d <= 7; d++) expect(after).toContain(`job_event_p${ymd(addDays(now, d))}`);

      const left = await db.pool.query<{ kind: string; n: number }>(
        "SELECT kind, count(*)::int AS n FROM workhorse.job_event WHERE kind IN ('old', 'ancient', 'future') GROUP BY kind ORDER BY kind",
      );
      expect(left.rows).toEqual([
        { kind: 'future', n: 1 },
        { kind: 'old', n: 1 },
      ]);
      const attemptsLeft = await db.pool.query('SELECT 1 FROM workhorse.attempt_history WHERE finished_at = $1', [ancient]);
      expect(attemptsLeft.rowCount).toBe(0);

      // Nothing older is left, so a second call drops nothing.
      const again = await db.pool.query<{ n: number }>('SELECT workhorse.drop_history_before_v1($1) AS n', [cut]);
      expect(again.rows[0].n).toBe(0);
      await db.pool.query(`SELECT workhorse.set_retention_v1('{"jobEventDays": 14, "attemptHistoryDays": 14}')`);
      await db.pool.query("DELETE FROM workhorse.job_event WHERE kind IN ('old', 'future')");
    });
  });

  describe('tick_v1', () => {
    it('returns {"skipped": true} while another transaction holds its lock', async () => {
      const holder = await db.pool.connect();
      try {
        await holder.query('BEGIN');
        const first = await holder.query<{ tick: { skipped: boolean } }>('SELECT workhorse.tick_v1() AS tick');
        expect(first.rows[0].tick).toMatchObject({ skipped: false, promoted: expect.any(Number), recovered: expect.any(Number) });

        const other = await db.pool.query<{ tick: { skipped: boolean } }>('SELECT workhorse.tick_v1() AS tick');
        expect(other.rows[0].tick).toEqual({ skipped: true, schedulesToPlan: false });

        await holder.query('COMMIT');
      } finally {
        holder.release();
      }
      // The lock is transaction-scoped: once the holder commits, the next tick works.
      const later = await db.pool.query<{ tick: { skipped: boolean } }>('SELECT workhorse.tick_v1() AS tick');
      expect(later.rows[0].tick).toMatchObject({ skipped: false });
    });

    it('promotes due scheduled jobs when it is not skipped', async () => {
      const queue = new Queue(db.pool);
      const id = await queue.enqueue('tick.promote', null, { runAt: new Date(Date.now() + 60_000) });
      // Protocol test, not a timing test: make the job due instead of waiting a minute.
      await db.pool.query("UPDATE workhorse.job_runtime SET run_at = clock_timestamp() - interval '1 second' WHERE job_id = $1", [id]);
      const tick = await db.pool.query<{ tick: { skipped: boolean; promoted: number } }>('SELECT workhorse.tick_v1() AS tick');
      expect(tick.rows[0].tick).toMatchObject({ skipped: false, promoted: 1 });
      const state = await db.pool.query('SELECT state FROM workhorse.job_runtime WHERE job_id = $1', [id]);
      expect(state.rows).toEqual([{ state: 'ready' }]);
    });
  });
});
