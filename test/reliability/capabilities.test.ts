/**
 * The privilege model (issue 15, item 1): the protocol functions are the only door.
 *
 * For each capability (producer, worker, operator) and for all three together (grantAppRole), a
 * login role with exactly those grants connects and tries every statement it must not run, as
 * the catalog lists them, so a table or function added later is tried too: read, insert,
 * update, delete and truncate on every table, view and partition of the schema (SELECT on
 * schema_version is the one read allowed); nextval, setval and reads of every sequence; every
 * function outside its capability, internal helpers included. Each answers 42501 and changes
 * nothing. Then what the capability is for works as that role: a producer enqueues and reads its
 * own jobs (and learns nothing of another role's), a worker runs jobs (the transactional path,
 * checkpoints, progress, sleeps, retries, ticks), an operator reads, cancels, pauses, redrives
 * and runs retention.
 *
 * The catalog checks that keep the model whole: every workhorse.*_vN function is listed in
 * workhorse.protocol_function (sql/990_privileges.sql), is SECURITY DEFINER with the pinned
 * search_path, and nothing else is; PUBLIC may execute nothing; no role other than the owner may
 * write any table. And a caller's search_path cannot hijack a protocol function: a function the
 * caller planted in front of pg_catalog is never called by one.
 */
import { Pool, type Client } from 'pg';
import {
  Admin,
  CAPABILITIES,
  grantRole,
  Queue,
  Worker,
  type Capability,
  type WorkerEvent,
} from '../../lib/core';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SQL_DIR } from '../../lib/core/schema';
import { withTestDatabase } from '../support/db';
import { claim, claimOne, fail } from '../support/protocol';
import { clientFor, poolFor, sqlstateOf, type LoginRole } from '../support/roles';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const { db, roles } = useTestDatabase({
  beforeDrop: async () => {
    for (const handle of opened.splice(0)) await handle.end().catch(() => undefined);
  },
});
const opened: { end(): Promise<unknown> }[] = [];

beforeAll(async () => {
  // A table of the application's own, for a transactional handler's writes.
  await db.pool.query('CREATE TABLE public.app_effects (job_id uuid PRIMARY KEY, note text NOT NULL)');
});

interface Granted {
  role: LoginRole;
  pool: Pool;
  client: Client;
}

async function roleWith(capabilities: readonly Capability[]): Promise<Granted> {
  const role = await roles.create(db.url, `wh_${capabilities.map((c) => c[0]).join('')}`);
  await grantRole(db.pool, role.name, capabilities);
  const pool = poolFor(role.url);
  const client = await clientFor(role.url);
  opened.push(pool, client);
  return { role, pool, client };
}

/** Every relation of the schema (partitions included) with its kind and one column. */
async function relations(): Promise<{ name: string; kind: string; column: string | null }[]> {
  const { rows } = await db.pool.query<{ name: string; kind: string; column: string | null }>(
    `SELECT c.relname AS name, c.relkind::text AS kind,
            (SELECT quote_ident(a.attname) FROM pg_attribute a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum LIMIT 1) AS column
     FROM pg_class c
     WHERE c.relnamespace = 'workhorse'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
     ORDER BY c.relname`,
  );
  return rows;
}

/** Every function of the schema: a call with NULL arguments of its types, and its capabilities. */
async function functions(): Promise<{ name: string; call: string; capabilities: Capability[] }[]> {
  const { rows } = await db.pool.query<{ name: string; call: string; capabilities: Capability[] | null }>(
    `SELECT p.proname AS name,
            format('SELECT workhorse.%I(%s)', p.proname,
                   (SELECT string_agg('NULL::' || format_type(t.type, NULL), ', ' ORDER BY t.n)
                    FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS t (type, n))) AS call,
            f.capabilities
     FROM pg_proc p
     LEFT JOIN workhorse.protocol_function f ON f.name = p.proname
     WHERE p.pronamespace = 'workhorse'::regnamespace
     ORDER BY p.proname`,
  );
  return rows.map((r) => ({ ...r, capabilities: r.capabilities ?? [] }));
}

/** Statements on every relation that no application role may run. */
async function forbiddenTableStatements(): Promise<string[]> {
  const statements: string[] = [];
  for (const { name, kind, column } of await relations()) {
    const rel = `workhorse.${name}`;
    if (kind === 'S') {
      statements.push(`SELECT nextval('${rel}')`, `SELECT setval('${rel}', 1)`, `SELECT last_value FROM ${rel}`);
      continue;
    }
    if (name !== 'schema_version') statements.push(`SELECT * FROM ${rel} LIMIT 1`);
    if (kind === 'v') continue;
    statements.push(
      `INSERT INTO ${rel} DEFAULT VALUES`,
      `UPDATE ${rel} SET ${column} = ${column}`,
      `DELETE FROM ${rel}`,
      `TRUNCATE ${rel}`,
    );
  }
  return statements;
}

async function rowCounts(): Promise<Record<string, number>> {
  const tables = (await relations()).filter((r) => r.kind === 'r' || r.kind === 'p').map((r) => r.name);
  const { rows } = await db.pool.query<Record<string, number>>(
    `SELECT ${tables.map((t) => `(SELECT count(*)::int FROM workhorse.${t}) AS ${t}`).join(', ')}`,
  );
  return rows[0];
}

const CASES: readonly (readonly Capability[])[] = [['producer'], ['worker'], ['operator'], CAPABILITIES];

const label = (c: readonly Capability[]): string => `${c[0] === 'operator' ? 'an' : 'a'} ${c.join('+')} role`;

describe.each(CASES.map((c) => [label(c), c] as const))('%s', (_label, capabilities) => {
  let granted: Granted;
  beforeAll(async () => {
    granted = await roleWith(capabilities);
  });

  it('may execute exactly the protocol functions of its capabilities', async () => {
    const { rows } = await db.pool.query<{ name: string; executable: boolean }>(
      `SELECT p.proname AS name, bool_or(has_function_privilege($1, p.oid, 'EXECUTE')) AS executable
       FROM pg_proc p WHERE p.pronamespace = 'workhorse'::regnamespace GROUP BY p.proname ORDER BY 1`,
      [granted.role.name],
    );
    const expected = (await functions()).filter((f) => f.capabilities.some((c) => capabilities.includes(c))).map((f) => f.name);
    expect(rows.filter((r) => r.executable).map((r) => r.name)).toEqual([...new Set(expected)].sort());
  });

  it('is refused every read and write of every table, view, partition and sequence (42501), but reading schema_version', async () => {
    const before = await rowCounts();
    const statements = await forbiddenTableStatements();
    expect(statements.length).toBeGreaterThan(60);
    const codes: Record<string, string> = {};
    for (const text of statements) codes[text] = await sqlstateOf(granted.client, text);
    expect(codes).toEqual(Object.fromEntries(statements.map((text) => [text, '42501'])));
    expect(await rowCounts()).toEqual(before);
    const { rows } = await granted.client.query<{ version: number }>('SELECT version FROM workhorse.schema_version');
    expect(rows).toHaveLength(1);
  });

  it('is refused every function outside its capabilities, internal helpers included (42501)', async () => {
    const before = await rowCounts();
    const refused = (await functions()).filter((f) => !f.capabilities.some((c) => capabilities.includes(c)));
    expect(refused.map((f) => f.name)).toEqual(expect.arrayContaining(['finish_job', 'requeue_job', 'lock_owned', 'ensure_history_partition']));
    const codes: Record<string, string> = {};
    for (const { call } of refused) codes[call] = await sqlstateOf(granted.client, call);
    expect(codes).toEqual(Object.fromEntries(refused.map(({ call }) => [call, '42501'])));
    expect(await rowCounts()).toEqual(before);
  });

  it('cannot change the schema nor grant itself anything (42501)', async () => {
    const statements = [
      'ALTER TABLE workhorse.job ADD COLUMN evil integer',
      'ALTER TABLE workhorse.job_runtime DROP CONSTRAINT job_runtime_owner_check',
      'DROP TABLE workhorse.job_event_default',
      'DROP SCHEMA workhorse CASCADE',
      'CREATE TABLE workhorse.evil (id integer)',
      "CREATE OR REPLACE FUNCTION workhorse.tick_v1() RETURNS jsonb LANGUAGE sql AS $$ SELECT '{}'::jsonb $$",
      'ALTER FUNCTION workhorse.enqueue_many_v1(jsonb) SECURITY INVOKER',
      'ALTER FUNCTION workhorse.enqueue_many_v1(jsonb) RESET search_path',
      'CREATE INDEX evil_idx ON workhorse.job (payload)',
      'DELETE FROM workhorse.protocol_function',
      `GRANT INSERT ON workhorse.job_outcome TO ${granted.client.escapeIdentifier(granted.role.name)}`,
      `GRANT EXECUTE ON FUNCTION workhorse.requeue_job(uuid, timestamptz, timestamptz, jsonb, integer, boolean) TO ${granted.client.escapeIdentifier(granted.role.name)}`,
    ];
    const codes: Record<string, string> = {};
    for (const text of statements) codes[text] = await sqlstateOf(granted.client, text);
    expect(codes).toEqual(Object.fromEntries(statements.map((s) => [s, '42501'])));
  });
});

describe('what each capability is for works as that role', () => {
  it('a producer enqueues (also in its own transaction) and reads the jobs it enqueued, and nothing else', async () => {
    const producer = await roleWith(['producer']);
    const stranger = await roleWith(['producer']);
    const queue = new Queue(producer.pool);
    const id = await queue.enqueue('cap.produce', { n: 1 }, { queue: 'cap-producer' });
    const client = await producer.pool.connect();
    let inTx: string;
    try {
      await client.query('BEGIN');
      inTx = await queue.enqueue('cap.produce', { n: 2 }, { queue: 'cap-producer' }, client);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const many = await queue.enqueueMany([1, 2, 3].map((n) => ({ type: 'cap.produce', payload: { n }, queue: 'cap-producer' })));
    expect(await queue.getJob(id)).toMatchObject({ id, state: 'ready', payload: { n: 1 } });
    expect(await queue.getJob(inTx)).toMatchObject({ id: inTx, payload: { n: 2 } });
    for (const other of many) expect((await queue.getJob(other))?.id).toBe(other);
    // Another producer, and the owner's own jobs: answered as unknown.
    expect(await new Queue(stranger.pool).getJob(id)).toBeNull();
    const ownerJob = await new Queue(db.pool).enqueue('cap.produce', {}, { queue: 'cap-producer' });
    expect(await queue.getJob(ownerJob)).toBeNull();
    expect(await queue.getJob('0190a000-0000-7000-8000-000000000000')).toBeNull();
    // The operator's reads and actions are not a producer's.
    const admin = new Admin(producer.pool);
    await expect(admin.getJob(id)).rejects.toMatchObject({ code: '42501' });
    await expect(admin.listJobs({ queue: 'cap-producer' })).rejects.toMatchObject({ code: '42501' });
    await expect(admin.cancel(id)).rejects.toMatchObject({ code: '42501' });
    const owner = new Admin(db.pool);
    for (const job of [id, inTx, ...many, ownerJob]) expect(await owner.cancel(job)).toBe('canceled');
  });

  it('a worker runs jobs: claims, heartbeats, checkpoints, progress, retries, sleeps, releases, the transactional path and ticks', async () => {
    const worker = await roleWith(['worker']);
    await db.pool.query(`GRANT SELECT, INSERT ON public.app_effects TO ${worker.client.escapeIdentifier(worker.role.name)}`);
    const q = 'cap-worker';
    const producer = new Queue(db.pool);
    const txId = await producer.enqueue('cap.tx', { note: 'with the job' }, { queue: q });
    const workIds = await producer.enqueueMany(
      [0, 1, 2, 3].map((n) => ({ type: 'cap.work', payload: { n }, queue: q, retryPolicy: { kind: 'fixed' as const, delayMs: 0 } })),
    );
    const sleepId = await producer.enqueue('cap.sleep', {}, { queue: q });
    const unknownId = await producer.enqueue('cap.unknown', {}, { queue: q });

    const runner = new Worker(new Queue(worker.pool), {
      queues: [q],
      concurrency: 4,
      leaseMs: 3000,
      heartbeatMs: 200,
      pollMs: 50,
      tickMs: 100,
      unknownTypeDelayMs: 3_600_000,
    })
      .handle('cap.work', async (payload: { n: number }, ctx) => {
        const doubled = await ctx.checkpoint('double', () => payload.n * 2);
        await ctx.setProgress({ stage: 'doubled' });
        if (payload.n % 2 === 0 && ctx.attempt === 1) throw new Error('planned failure');
        return { doubled, attempt: ctx.attempt };
      })
      .handle('cap.sleep', async (_payload, ctx) => {
        await ctx.sleep('nap', 100);
        return 'woke';
      })
      .handle(
        'cap.tx',
        async (payload: { note: string }, ctx) => {
          await ctx.client?.query('INSERT INTO public.app_effects (job_id, note) VALUES ($1, $2)', [ctx.jobId, payload.note]);
          return 'stored';
        },
        { transactional: true },
      );
    const events: WorkerEvent[] = [];
    runner.on((event) => events.push(event));
    const done = runner.run();
    try {
      const admin = new Admin(db.pool);
      const ended = [txId, ...workIds, sleepId];
      await waitFor(
        async () => (await Promise.all(ended.map((id) => admin.getJob(id)))).every((job) => job?.state === 'succeeded'),
        30_000,
        'every job to succeed',
      );
      await waitFor(async () => (await admin.getJob(unknownId))?.state === 'scheduled', 15_000, 'the unknown type to be released');
    } finally {
      await runner.stop();
      await done;
    }
    expect(events.filter((e) => e.name === 'worker.error')).toEqual([]);
    expect(events.some((e) => e.name === 'job.failed' || e.name === 'job.retry_scheduled')).toBe(true);
    const admin = new Admin(db.pool);
    for (const [n, id] of workIds.entries()) {
      expect(await admin.getJob(id)).toMatchObject({ result: { doubled: n * 2, attempt: n % 2 === 0 ? 2 : 1 }, progress: { stage: 'doubled' } });
    }
    expect(await admin.getJob(sleepId)).toMatchObject({ result: 'woke' });
    expect(await admin.getJob(txId)).toMatchObject({ result: 'stored' });
    const { rows } = await db.pool.query('SELECT note FROM public.app_effects WHERE job_id = $1', [txId]);
    expect(rows).toEqual([{ note: 'with the job' }]);
    // A worker neither enqueues nor administers.
    await expect(new Queue(worker.pool).enqueue('cap.work', {}, { queue: q })).rejects.toMatchObject({ code: '42501' });
    await expect(new Admin(worker.pool).cancel(unknownId)).rejects.toMatchObject({ code: '42501' });
    expect(await admin.cancel(unknownId)).toBe('canceled');
  });

  it('an operator reads, cancels, pauses, lists and redrives dead letters, and runs maintenance and retention', async () => {
    const operator = await roleWith(['operator']);
    const admin = new Admin(operator.pool);
    const q = 'cap-operator';
    const producer = new Queue(db.pool);
    const dead = await producer.enqueue('cap.op', { dead: true }, { queue: q, maxAttempts: 1 });
    await fail(db.pool, await claimOne(db.pool, q), { name: 'Boom', message: 'no' });
    const live = await producer.enqueue('cap.op', { live: true }, { queue: q });

    expect((await admin.getJob(dead))?.state).toBe('failed');
    expect((await admin.listJobs({ queue: q })).items.map((j) => j.id).sort()).toEqual([live, dead].sort());
    expect((await admin.getJobTimeline(dead)).items.length).toBeGreaterThan(0);
    expect((await admin.listDeadLetters({ queue: q })).items.map((j) => j.id)).toEqual([dead]);
    expect(await admin.redriveMany({ queue: q }, { requestId: 'cap-op-dry', dryRun: true })).toEqual([{ sourceJobId: dead, newJobId: null }]);
    const redriven = await admin.redrive(dead, { requestId: 'cap-op-1', actor: 'ops' });
    expect((await admin.pauseQueue(q, { actor: 'ops' })).paused).toBe(true);
    expect((await admin.resumeQueue(q)).paused).toBe(false);
    expect((await admin.listQueues()).map((i) => i.queue)).toContain(q);
    // Flow control: an operator sets a queue's limits, and a worker role's claim applies them.
    const limited = 'cap-limited';
    await producer.enqueueMany([1, 2, 3].map((n) => ({ type: 'cap.op', payload: { n }, queue: limited })));
    expect(await admin.setQueuePolicy(limited, { concurrency: 2, rateLimit: { limit: 10, intervalMs: 60_000 } }, { actor: 'ops' })).toMatchObject({
      concurrency: 2,
      rateLimit: { limit: 10, intervalMs: 60_000 },
    });
    const worker = await roleWith(['worker']);
    expect(await claim(worker.pool, limited, { limit: 10 })).toHaveLength(2);
    await expect(new Admin(worker.pool).setQueuePolicy(limited, null)).rejects.toMatchObject({ code: '42501' });
    expect(await admin.cancel(live)).toBe('canceled');
    expect(await admin.cancel(redriven)).toBe('canceled');
    const { rows } = await operator.pool.query<{ tick: { skipped: boolean }; prepared: number; dropped: number }>(
      `SELECT workhorse.tick_v1() AS tick, workhorse.prepare_partitions_v1(7) AS prepared,
              workhorse.drop_history_before_v1(clock_timestamp() - interval '30 days') AS dropped`,
    );
    expect(rows[0]).toMatchObject({ tick: { skipped: false }, prepared: 0, dropped: 0 });
    // An operator neither enqueues nor claims.
    await expect(new Queue(operator.pool).enqueue('cap.op', {}, { queue: q })).rejects.toMatchObject({ code: '42501' });
    await expect(claimOne(operator.pool, q)).rejects.toMatchObject({ code: '42501' });
  });
});

describe('orchestration as those roles', () => {
  it('a producer enqueues with dependsOn, a worker runs children and reads dependencies, an operator reads the lineage', async () => {
    const producer = new Queue((await roleWith(['producer'])).pool);
    const workerRole = await roleWith(['worker']);
    const admin = new Admin((await roleWith(['operator'])).pool);
    const q = 'cap-orchestration';
    const [first, second] = await producer.enqueueMany([
      { type: 'cap.first', payload: 1, queue: q },
      { type: 'cap.parent', payload: 2, queue: q, dependsOn: [0] },
    ]);
    expect((await producer.getJob(second))?.state).toBe('blocked');
    const worker = new Worker(new Queue(workerRole.pool), { queues: [q], pollMs: 50, tickMs: 200 });
    worker.handle('cap.first', (n: number) => n * 10);
    worker.handle('cap.child', (n: number) => n + 1);
    worker.handle('cap.parent', async (n: number, ctx) => {
      const [dependency] = await ctx.dependencies();
      const child = await ctx.runChild<number>('child', 'cap.child', dependency.result as number, { queue: q });
      return child + n;
    });
    const done = worker.run();
    try {
      await waitFor(async () => (await admin.getJob(second))?.state === 'succeeded', 30_000, 'the parent to succeed');
    } finally {
      await worker.stop();
      await done;
    }
    const parent = await admin.getJob(second);
    expect(parent).toMatchObject({ result: 13, dependencies: [{ id: first, state: 'succeeded' }], children: [{ state: 'succeeded', key: 'child' }] });
    expect((await admin.listJobs({ parentId: second })).items.map((j) => j.type)).toEqual(['cap.child']);
  });
});

describe('schedules, capability by capability', () => {
  it('a producer syncs (and plans), a worker fires the occurrences, an operator lists, pauses, resumes and triggers; nothing more', async () => {
    const producer = await roleWith(['producer']);
    const worker = await roleWith(['worker']);
    const operator = await roleWith(['operator']);
    const namespace = 'cap-schedules';
    const q = 'cap-schedules';
    const definition = { key: 'cap.tick', type: 'cap.scheduled', cron: '* * * * * *', options: { queue: q }, missedAfterMs: 5000 };
    // A producer defines; the others may not (a definition enqueues jobs).
    expect(await new Queue(producer.pool).syncSchedules(namespace, [definition])).toEqual([{ key: 'cap.tick', change: 'created', revision: 1 }]);
    for (const other of [worker, operator]) {
      await expect(new Queue(other.pool).syncSchedules(namespace, [])).rejects.toMatchObject({ code: '42501' });
    }
    // The producer planned at once.
    const { rows: planned } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM workhorse.schedule_occurrence o JOIN workhorse.schedule s ON s.id = o.schedule_id
       WHERE s.namespace = $1 AND o.state = 'planned'`,
      [namespace],
    );
    expect(planned[0].n).toBeGreaterThan(0);

    // A worker's ticks fire the occurrences; it runs their jobs.
    const ran: string[] = [];
    const runner = new Worker(new Queue(worker.pool), { queues: [q], pollMs: 50, tickMs: 100 }).handle('cap.scheduled', async (_p, ctx) => {
      ran.push(ctx.jobId);
      return null;
    });
    const errors: WorkerEvent[] = [];
    runner.on(['worker.error'], (event) => errors.push(event));
    const done = runner.run();
    try {
      await waitFor(() => ran.length >= 2, 20_000, 'two occurrences to fire and run');
    } finally {
      await runner.stop();
      await done;
    }
    expect(errors).toEqual([]);
    for (const other of [producer, worker]) {
      const admin = new Admin(other.pool);
      await expect(admin.listSchedules({ namespace })).rejects.toMatchObject({ code: '42501' });
      await expect(admin.pauseSchedule('cap.tick', { namespace })).rejects.toMatchObject({ code: '42501' });
      await expect(admin.triggerSchedule('cap.tick', { namespace })).rejects.toMatchObject({ code: '42501' });
    }

    // An operator operates them.
    const admin = new Admin(operator.pool);
    expect(await admin.pauseSchedule('cap.tick', { namespace, actor: 'ops' })).toBe(true);
    const [listed] = await admin.listSchedules({ namespace });
    expect(listed).toMatchObject({ key: 'cap.tick', state: 'paused', pausedBy: 'ops' });
    expect(ran).toContain(listed.lastJobId);
    const triggered = await admin.triggerSchedule('cap.tick', { namespace, actor: 'ops' });
    expect(await admin.resumeSchedule('cap.tick', { namespace })).toBe(true);
    expect((await admin.getScheduleHistory('cap.tick', { namespace })).map((h) => h.change)).toEqual(['resumed', 'triggered', 'paused', 'created']);
    expect((await admin.getJob(triggered))?.type).toBe('cap.scheduled');

    // Done: disabled by its producer, and the jobs left canceled.
    await new Queue(producer.pool).syncSchedules(namespace, []);
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT r.job_id AS id FROM workhorse.job_runtime r JOIN workhorse.job j ON j.id = r.job_id WHERE j.type = 'cap.scheduled'`,
    );
    for (const { id } of rows) await new Admin(db.pool).cancel(id);
  });
});

describe('the privilege model', () => {
  it('lists every protocol function, makes exactly those SECURITY DEFINER with a pinned search_path, and lets PUBLIC execute nothing', async () => {
    const { rows } = await db.pool.query<{ name: string; listed: boolean; definer: boolean; config: string[] | null; public: boolean }>(
      `SELECT p.proname AS name, f.name IS NOT NULL AS listed, p.prosecdef AS definer, p.proconfig AS config,
              has_function_privilege('public', p.oid, 'EXECUTE') AS public
       FROM pg_proc p LEFT JOIN workhorse.protocol_function f ON f.name = p.proname
       WHERE p.pronamespace = 'workhorse'::regnamespace ORDER BY 1`,
    );
    const protocol = rows.filter((r) => /_v\d+$/.test(r.name));
    expect(protocol.length).toBeGreaterThanOrEqual(30);
    expect(protocol.filter((r) => !r.listed).map((r) => r.name)).toEqual([]);
    expect(rows.filter((r) => r.definer).map((r) => r.name)).toEqual(protocol.map((r) => r.name));
    for (const r of protocol) expect([r.name, r.config]).toEqual([r.name, expect.arrayContaining(['search_path=pg_catalog, pg_temp'])]);
    expect(rows.filter((r) => r.public).map((r) => r.name)).toEqual([]);
  });

  it('writes every protocol function in PL/pgSQL (a SECURITY DEFINER SQL function is planned on every call before PostgreSQL 18)', async () => {
    const { rows } = await db.pool.query<{ name: string; language: string }>(
      `SELECT p.proname AS name, l.lanname AS language FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
       WHERE p.pronamespace = 'workhorse'::regnamespace AND p.proname ~ '_v[0-9]+$' AND l.lanname <> 'plpgsql'`,
    );
    expect(rows).toEqual([]);
  });

  it('lets no role but the schema owner and superusers write any table, and PUBLIC read none', async () => {
    const { rows } = await db.pool.query<{ role: string; relation: string }>(
      `SELECT r.rolname AS role, c.relname AS relation
       FROM pg_class c CROSS JOIN pg_roles r
       WHERE c.relnamespace = 'workhorse'::regnamespace AND c.relkind IN ('r', 'p', 'v')
         AND NOT r.rolsuper AND r.oid >= 16384 AND r.oid <> c.relowner
         AND has_table_privilege(r.oid, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
       UNION ALL
       SELECT 'PUBLIC', c.relname FROM pg_class c
       WHERE c.relnamespace = 'workhorse'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
         AND has_table_privilege('public', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')`,
    );
    expect(rows).toEqual([]);
  });

  it('is the table of docs/security.md, function by function', async () => {
    const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'security.md'), 'utf8');
    const documented = [...doc.matchAll(/^\| `(\w+_v\d+)` \|([^|]*)\|([^|]*)\|([^|]*)\|$/gm)].map(
      (m) => [m[1], CAPABILITIES.filter((_, i) => m[i + 2].trim() === 'yes')] as const,
    );
    const { rows } = await db.pool.query<{ name: string; capabilities: Capability[] }>('SELECT name, capabilities FROM workhorse.protocol_function');
    const listed = Object.fromEntries(rows.map((r) => [r.name, CAPABILITIES.filter((c) => r.capabilities.includes(c))]));
    expect(Object.fromEntries(documented)).toEqual(listed);
  });

  it('refuses to install while a protocol function is missing from the list', async () => {
    await withTestDatabase(
      async (fresh) => {
        const files = readdirSync(SQL_DIR).filter((f) => f.endsWith('.sql')).sort();
        expect(files[files.length - 1]).toBe('990_privileges.sql');
        const client = await fresh.pool.connect();
        try {
          await client.query('BEGIN');
          for (const file of files.slice(0, -1)) await client.query(readFileSync(join(SQL_DIR, file), 'utf8'));
          await client.query("CREATE FUNCTION workhorse.forgotten_v1() RETURNS integer LANGUAGE sql AS 'SELECT 1'");
          await expect(client.query(readFileSync(join(SQL_DIR, '990_privileges.sql'), 'utf8'))).rejects.toMatchObject({
            code: '42501',
            message: expect.stringContaining('workhorse.forgotten_v1()'),
          });
        } finally {
          await client.query('ROLLBACK');
          client.release();
        }
      },
      { installSchema: false },
    );
  });

  it('runs no function a caller put on its search_path, in front of pg_catalog, from inside a protocol function', async () => {
    const attacker = await roleWith(CAPABILITIES);
    await db.pool.query(`GRANT CREATE ON DATABASE "${db.name}" TO "${attacker.role.name}"`);
    await attacker.client.query(`
      CREATE SCHEMA evil;
      CREATE TABLE evil.calls (fn text NOT NULL);
      CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS
        $$ INSERT INTO evil.calls VALUES ('clock_timestamp') RETURNING pg_catalog.clock_timestamp() $$;
      CREATE FUNCTION evil.nextval(regclass) RETURNS bigint LANGUAGE sql VOLATILE AS
        $$ INSERT INTO evil.calls VALUES ('nextval') RETURNING pg_catalog.nextval($1) $$;
      CREATE FUNCTION evil.length(text) RETURNS integer LANGUAGE sql VOLATILE AS
        $$ INSERT INTO evil.calls VALUES ('length') RETURNING pg_catalog.length($1) $$;
      CREATE FUNCTION evil.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql VOLATILE AS
        $$ INSERT INTO evil.calls VALUES ('jsonb_typeof') RETURNING pg_catalog.jsonb_typeof($1) $$;
      CREATE FUNCTION evil.pg_notify(text, text) RETURNS void LANGUAGE sql VOLATILE AS
        $$ INSERT INTO evil.calls VALUES ('pg_notify'); SELECT pg_catalog.pg_notify($1, $2) $$;
      CREATE TEMP TABLE job_runtime (job_id uuid);`);
    const hijacked = new Pool({ connectionString: attacker.role.url, max: 2, options: '-c search_path=evil,pg_catalog,pg_temp' });
    hijacked.on('error', () => undefined);
    opened.push(hijacked);
    const count = async (): Promise<number> =>
      Number((await attacker.pool.query<{ n: string }>('SELECT count(*) AS n FROM evil.calls')).rows[0].n);
    // The trap works: the caller's own statements do call the planted functions.
    await hijacked.query('SELECT clock_timestamp(), length($1::text)', ['x']);
    expect(await count()).toBe(2);
    await attacker.pool.query('DELETE FROM evil.calls');

    const q = 'cap-hijack';
    const queue = new Queue(hijacked);
    const admin = new Admin(hijacked);
    const id = await queue.enqueue('cap.hijack', { x: 1 }, { queue: q, runAt: new Date(Date.now() - 1000), tags: ['a'], idempotencyKey: 'k' });
    const failed = await queue.enqueue('cap.hijack', { x: 2 }, { queue: q, maxAttempts: 1 });
    const owner = await claimOne(hijacked, q, { workerId: 'hijack-worker' });
    await hijacked.query('SELECT * FROM workhorse.heartbeat_many_v1($1, $2::jsonb, 60000)', [
      owner.workerId,
      JSON.stringify([{ jobId: owner.jobId, fence: Number(owner.fence) }]),
    ]);
    await hijacked.query('SELECT workhorse.save_checkpoint_v1($1, $2, $3, $4, $5)', [owner.jobId, owner.workerId, owner.fence, 'c', '1']);
    await hijacked.query('SELECT workhorse.set_progress_v1($1, $2, $3, $4)', [owner.jobId, owner.workerId, owner.fence, '{"p":1}']);
    await hijacked.query('SELECT * FROM workhorse.complete_many_v1($1, $2::jsonb)', [
      owner.workerId,
      JSON.stringify([{ jobId: owner.jobId, fence: Number(owner.fence), result: 'ok' }]),
    ]);
    await fail(hijacked, await claimOne(hijacked, q, { workerId: 'hijack-worker' }), { name: 'Boom', message: 'no' });
    await admin.getJob(id);
    await admin.listJobs({ queue: q });
    await admin.getJobTimeline(id);
    await admin.listDeadLetters({ queue: q });
    const copy = await admin.redrive(failed, { requestId: 'hijack-1' });
    await admin.pauseQueue(q, { actor: 'x' });
    await admin.resumeQueue(q);
    await admin.cancel(copy);
    await hijacked.query('SELECT workhorse.tick_v1()');
    expect(await count()).toBe(0);
    expect((await new Admin(db.pool).getJob(id))?.state).toBe('succeeded');
  });
});
