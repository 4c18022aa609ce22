/**
 * Least privilege (issue 6, item 5; issue 15, item 1): the schema is installed by a superuser,
 * an application role gets only what `grantAppRole` (= docs/least-privilege.sql with all three
 * capabilities) grants, and everything the library does at run time works as that role:
 * enqueue, workers (claims, heartbeats, checkpoints, progress, retries, durable sleeps,
 * releases, transactional handlers, cancellation), maintenance ticks, admin reads and actions.
 * The role cannot change the schema nor touch a table (42501): the attacks an application role
 * could make with the earlier table grants (deleting live rows, rewriting owners, forging
 * outcomes, checkpoints and events, deleting idempotency keys, calling the fence-skipping
 * helpers) are each refused. test/reliability/capabilities.test.ts holds the narrower roles.
 *
 * The installation prepares history partitions for today and the next seven days, so the
 * workers' ticks never reach partition preparation here; one test removes a prepared day on
 * purpose to show that a tick by the role can still prepare it, which needs
 * prepare_partitions_v1 to run with its owner's rights (SECURITY DEFINER).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { Client, Pool } from 'pg';
import {
  Admin,
  installSchema,
  Queue,
  SCHEMA_VERSION,
  verifySchema,
  Worker,
  WorkhorseValidationError,
  type WorkerEvent,
} from '../../lib/core';
import { GRANT_ROLE_SQL, grantAppRole, grantRole } from '../../lib/core/grants';
import { claim, claimOne, forceExpire } from '../support/protocol';
import { itIf } from '../support/requirements';
import { clientFor, poolFor, sqlstateOf } from '../support/roles';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const DOCS_SCRIPT = join(__dirname, '..', '..', 'docs', 'least-privilege.sql');


function findPsql(): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, 'psql'), constants.X_OK);
      return join(dir, 'psql');
    } catch {
      // not here
    }
  }
  return null;
}

const { db, roles } = useTestDatabase({
  afterEachTest: async () => {
    for (const { worker, done } of workers.splice(0)) {
      await worker.stop();
      await done;
    }
  },
  beforeDrop: async () => {
    await appClient?.end().catch(() => undefined);
    await appPool?.end().catch(() => undefined);
  },
});
/** Connected as the application role. */
let appPool: Pool;
/**
 * Also the application role, for statements meant to fail: a pool replaces the connection of
 * every failed query with a new login.
 */
let appClient: Client;
let queue: Queue;
let admin: Admin;
const workers: { worker: Worker; done: Promise<void> }[] = [];

let appRole: string;

beforeAll(async () => {
  const role = await roles.create(db.url);
  appRole = role.name;
  await grantAppRole(db.pool, appRole);
  appPool = poolFor(role.url);
  appClient = await clientFor(role.url);
  queue = new Queue(appPool);
  admin = new Admin(appPool);
  // A table of the application's own, for a transactional handler's writes.
  await db.pool.query('CREATE TABLE public.app_effects (job_id uuid PRIMARY KEY, note text NOT NULL)');
  await db.pool.query(`GRANT SELECT, INSERT ON public.app_effects TO ${appRole}`);
});

function start(worker: Worker): WorkerEvent[] {
  const events: WorkerEvent[] = [];
  worker.on((event) => events.push(event));
  workers.push({ worker, done: worker.run() });
  return events;
}

describe('an application role with the least-privilege grants', () => {
  it('is an ordinary role: no superuser, owns nothing in the schema, cannot create in it', async () => {
    const { rows } = await appPool.query<{ who: string; superuser: boolean; create: boolean; owned: number }>(
      `SELECT current_user AS who,
              (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
              has_schema_privilege('workhorse', 'CREATE') AS create,
              (SELECT count(*)::int FROM pg_class WHERE relnamespace = 'workhorse'::regnamespace
                 AND relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)) AS owned`,
    );
    expect(rows[0]).toEqual({ who: appRole, superuser: false, create: false, owned: 0 });
  });

  it('lets installSchema and verifySchema run as the role once the schema is installed (they write nothing)', async () => {
    await expect(installSchema(appPool)).resolves.toEqual({ created: false, from: SCHEMA_VERSION, to: SCHEMA_VERSION, applied: [] });
    await expect(verifySchema(appPool)).resolves.toBeUndefined();
  });

  it('enqueues, runs workers (claims, heartbeats, checkpoints, progress, retries, sleeps, releases, transactional handlers, cancel) and reads', async () => {
    const q = 'app-main';
    const client = await appPool.connect();
    let txId: string;
    try {
      await client.query('BEGIN');
      txId = await queue.enqueue('app.tx', { note: 'written with the job' }, { queue: q }, client);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const workIds = await queue.enqueueMany(
      Array.from({ length: 20 }, (_, n) => ({ type: 'app.work', payload: { n }, queue: q, retryPolicy: { kind: 'fixed' as const, delayMs: 0 } })),
    );
    const keyed = await queue.enqueue('app.work', { n: 100 }, { queue: q, idempotencyKey: 'order-100', retryPolicy: { kind: 'fixed', delayMs: 0 } });
    expect(await queue.enqueue('app.work', { n: 100 }, { queue: q, idempotencyKey: 'order-100', retryPolicy: { kind: 'fixed', delayMs: 0 } })).toBe(keyed);
    const slowId = await queue.enqueue('app.slow', {}, { queue: q });
    const sleepId = await queue.enqueue('app.sleep', {}, { queue: q });
    const cancelId = await queue.enqueue('app.cancel', {}, { queue: q });
    const deadId = await queue.enqueue('app.fail', {}, { queue: q, maxAttempts: 1 });
    const unknownId = await queue.enqueue('app.unknown', {}, { queue: q });

    const worker = new Worker(queue, {
      queues: [q],
      concurrency: 8,
      leaseMs: 3000,
      heartbeatMs: 200,
      pollMs: 50,
      tickMs: 100,
      unknownTypeDelayMs: 3_600_000,
    })
      .handle('app.work', async (payload: { n: number }, ctx) => {
        const doubled = await ctx.checkpoint('double', () => payload.n * 2);
        await ctx.setProgress({ stage: 'doubled' });
        if (payload.n % 5 === 0 && ctx.attempt === 1) throw new Error('planned failure');
        return { doubled, attempt: ctx.attempt };
      })
      .handle('app.slow', async (_payload, ctx) => {
        await waitFor(
          async () => {
            const { rows } = await db.pool.query<{ renewed: boolean }>(
              'SELECT heartbeat_at > attempt_started_at AS renewed FROM workhorse.job_runtime WHERE job_id = $1',
              [ctx.jobId],
            );
            return rows[0]?.renewed === true;
          },
          15_000,
          'a heartbeat by the role',
        );
        return 'renewed';
      })
      .handle('app.sleep', async (_payload, ctx) => {
        await ctx.sleep('nap', 200);
        return 'woke';
      })
      .handle('app.cancel', async (_payload, ctx) => {
        await new Promise<void>((resolve) => {
          if (ctx.signal.aborted) resolve();
          ctx.signal.addEventListener('abort', () => resolve(), { once: true });
        });
        throw ctx.signal.reason;
      })
      .handle('app.fail', async () => {
        throw new Error('always fails');
      })
      .handle(
        'app.tx',
        async (payload: { note: string }, ctx) => {
          await ctx.client?.query('INSERT INTO public.app_effects (job_id, note) VALUES ($1, $2)', [ctx.jobId, payload.note]);
          return 'stored';
        },
        { transactional: true },
      );
    const events = start(worker);

    await waitFor(async () => (await admin.getJob(cancelId))?.state === 'active', 15_000, 'the cancel job to run');
    expect(await admin.cancel(cancelId, { reason: 'by the app role' })).toBe('cancel_requested');

    const ended = [txId, ...workIds, keyed, slowId, sleepId, cancelId, deadId];
    await waitFor(
      async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM workhorse.job_outcome WHERE job_id = ANY ($1::uuid[])',
          [ended],
        );
        return rows[0].n === ended.length;
      },
      30_000,
      'every job to end',
    );
    await waitFor(async () => (await admin.getJob(unknownId))?.state === 'scheduled', 15_000, 'the unknown type to be released');
    await worker.stop();
    expect(events.filter((e) => e.name === 'worker.error')).toEqual([]);

    for (const [n, id] of workIds.entries()) {
      expect(await admin.getJob(id)).toMatchObject({
        state: 'succeeded',
        result: { doubled: n * 2, attempt: n % 5 === 0 ? 2 : 1 },
        progress: { stage: 'doubled' },
      });
    }
    expect(await admin.getJob(keyed)).toMatchObject({ state: 'succeeded', result: { doubled: 200, attempt: 2 } });
    expect(await admin.getJob(slowId)).toMatchObject({ state: 'succeeded', result: 'renewed' });
    expect(await admin.getJob(sleepId)).toMatchObject({ state: 'succeeded', result: 'woke', currentAttempt: 1 });
    expect(await admin.getJob(cancelId)).toMatchObject({ state: 'canceled', error: { message: 'by the app role' } });
    expect(await admin.getJob(txId)).toMatchObject({ state: 'succeeded', result: 'stored' });
    const { rows: effects } = await appPool.query('SELECT note FROM public.app_effects WHERE job_id = $1', [txId]);
    expect(effects).toEqual([{ note: 'written with the job' }]);
    const sleepTimeline = await admin.getJobTimeline(sleepId);
    expect(sleepTimeline.items.map((e) => e.kind)).toEqual(expect.arrayContaining(['sleeping', 'woke']));
    const released = await admin.getJobTimeline(unknownId);
    expect(released.items.map((e) => `${e.source}:${e.kind}`)).toEqual(expect.arrayContaining(['event:released', 'attempt:released']));
    expect(await admin.cancel(unknownId)).toBe('canceled');

    // Dead letters, redrive and queue control are admin actions the role may take too.
    expect(await admin.getJob(deadId)).toMatchObject({ state: 'failed', error: { message: 'always fails' } });
    const dead = await admin.listDeadLetters({ queue: q });
    expect(dead.items.map((j) => j.id)).toEqual([deadId]);
    const redriven = await admin.redrive(deadId, { requestId: 'app-redrive-1', actor: 'ops' });
    expect(await admin.redrive(deadId, { requestId: 'app-redrive-1', actor: 'ops' })).toBe(redriven);
    expect(await admin.getJob(redriven)).toMatchObject({ state: 'ready', redrivenFrom: deadId });
    expect((await admin.pauseQueue(q, { actor: 'ops' })).paused).toBe(true);
    expect((await admin.resumeQueue(q)).paused).toBe(false);
    expect((await admin.listQueues()).map((info) => info.queue)).toContain(q);
    const listed = await admin.listJobs({ queue: q, states: ['succeeded'], limit: 1000 });
    expect(listed.items).toHaveLength(workIds.length + 4);
    expect(await admin.cancel(redriven)).toBe('canceled');
  });

  it('runs tick_v1: deadlines, promotion, lease recovery and the expiry of idempotency keys', async () => {
    const q = 'app-tick';
    const later = await queue.enqueue('app.tick', {}, { queue: q, runAt: new Date(Date.now() + 3_600_000) });
    const doomed = await queue.enqueue('app.tick', {}, { queue: q, runAt: new Date(Date.now() + 3_600_000), deadline: new Date(Date.now() + 7_200_000) });
    await queue.enqueue('app.tick', { keyed: true }, { queue: 'app-tick-keys', idempotencyKey: 'short-lived', idempotencyTtlMs: 1000 });
    // Time is simulated (the superuser moves the clocks of these rows into the past) so the test
    // is about privileges, not about waiting.
    await db.pool.query("UPDATE workhorse.job_runtime SET run_at = clock_timestamp() - interval '1 second' WHERE job_id = $1", [later]);
    await db.pool.query("UPDATE workhorse.job_runtime SET deadline = clock_timestamp() - interval '1 second' WHERE job_id = $1", [doomed]);
    await db.pool.query("UPDATE workhorse.enqueue_idempotency SET expires_at = clock_timestamp() - interval '1 second'");

    const first = await appPool.query<{ tick: Record<string, unknown> }>('SELECT workhorse.tick_v1() AS tick');
    expect(first.rows[0].tick).toMatchObject({ skipped: false, promoted: 1, deadlinesExpired: 1, partitionsCreated: 0 });
    expect(await admin.getJob(doomed)).toMatchObject({ state: 'failed', error: { name: 'DeadlineExceeded' } });
    expect((await admin.getJob(later))?.state).toBe('ready');
    const { rows: keys } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.enqueue_idempotency');
    expect(keys[0].n).toBe(0);

    const claimed = await claim(appPool, q, { workerId: 'app-crashed-worker', leaseMs: 1000 });
    expect(claimed.map((c) => c.jobId)).toEqual([later]);
    await forceExpire(db.pool, later);
    const second = await appPool.query<{ tick: Record<string, unknown> }>('SELECT workhorse.tick_v1() AS tick');
    expect(second.rows[0].tick).toMatchObject({ skipped: false, recovered: 1 });
    expect(await admin.getJob(later)).toMatchObject({ state: 'ready', error: { name: 'LeaseExpired' } });
    expect(await admin.cancel(later)).toBe('canceled');
  });

  it('prepares missing history partitions from tick_v1 (prepare_partitions_v1 runs with the owner\u2019s rights)', async () => {
    const { rows } = await db.pool.query<{ day: string; owner: string }>(
      `SELECT to_char((clock_timestamp() AT TIME ZONE 'UTC')::date + 2, 'YYYYMMDD') AS day,
              (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'workhorse') AS owner`,
    );
    const { day, owner } = rows[0];
    // The day after tomorrow's partitions are what a tick checks for; remove them (they are empty).
    await db.pool.query(`DROP TABLE workhorse.job_event_p${day}, workhorse.attempt_history_p${day}`);

    const tick = await appPool.query<{ tick: Record<string, unknown> }>('SELECT workhorse.tick_v1() AS tick');
    expect(tick.rows[0].tick).toMatchObject({ skipped: false, partitionsCreated: 2 });
    const { rows: parts } = await db.pool.query<{ name: string; owner: string }>(
      `SELECT relname AS name, relowner::regrole::text AS owner FROM pg_class
       WHERE relnamespace = 'workhorse'::regnamespace AND relname IN ($1, $2) ORDER BY relname`,
      [`attempt_history_p${day}`, `job_event_p${day}`],
    );
    expect(parts).toEqual([
      { name: `attempt_history_p${day}`, owner },
      { name: `job_event_p${day}`, owner },
    ]);
  });

  it('cannot alter, drop, truncate or create anything in the schema, nor read or write a table, nor call a helper (42501)', async () => {
    const id = await queue.enqueue('app.guarded', {}, { queue: 'app-guarded' });
    const live = await queue.enqueue('app.guarded', { live: true }, { queue: 'app-guarded-live', idempotencyKey: 'guarded' });
    const owner = await claimOne(appPool, 'app-guarded-live', { workerId: 'app-guarded-worker' });
    expect(await admin.cancel(id)).toBe('canceled');
    const refused = [
      'ALTER TABLE workhorse.job ADD COLUMN evil integer',
      'ALTER TABLE workhorse.job_runtime DROP CONSTRAINT job_runtime_owner_check',
      'DROP TABLE workhorse.job_runtime',
      'DROP TABLE workhorse.job_event_default',
      'DROP SCHEMA workhorse CASCADE',
      'CREATE TABLE workhorse.evil (id integer)',
      'CREATE FUNCTION workhorse.evil() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$',
      "CREATE OR REPLACE FUNCTION workhorse.tick_v1() RETURNS jsonb LANGUAGE sql AS $$ SELECT '{}'::jsonb $$",
      'ALTER FUNCTION workhorse.claim_many_v1(text[], text, integer, integer) RENAME TO evil',
      'CREATE INDEX evil_idx ON workhorse.job (payload)',
      'TRUNCATE workhorse.job_event',
      "UPDATE workhorse.job SET payload = '{}'",
      "UPDATE workhorse.job_outcome SET result = '\"forged\"'",
      'DELETE FROM workhorse.job_outcome',
      'DELETE FROM workhorse.job_event',
      'DELETE FROM workhorse.job_checkpoint',
      // What the earlier table grants allowed (issue 15): jobs vanishing, owners rewritten, a
      // forged outcome for a live job, forged checkpoints and events, idempotency keys deleted.
      'DELETE FROM workhorse.job_runtime',
      `UPDATE workhorse.job_runtime SET worker_id = 'thief', fence_token = fence_token + 1 WHERE job_id = '${owner.jobId}'`,
      `INSERT INTO workhorse.job_outcome (job_id, queue, state, result, final_attempt, finished_at) VALUES ('${owner.jobId}', 'x', 'succeeded', '1', 1, now())`,
      `INSERT INTO workhorse.job_checkpoint (job_id, name, value, attempt, fence_token, worker_id, created_at) VALUES ('${owner.jobId}', 'forged', '1', 1, 1, 'x', now())`,
      `INSERT INTO workhorse.job_event (job_id, at, kind) VALUES ('${owner.jobId}', now(), 'succeeded')`,
      'DELETE FROM workhorse.enqueue_idempotency',
      'SELECT payload FROM workhorse.job',
      'SELECT * FROM workhorse.job_snapshot',
      "SELECT nextval('workhorse.fence_seq')",
      // Internal helpers that skip the fence, and the partition helper.
      `SELECT workhorse.finish_job(r, 'succeeded', '1', NULL, 'succeeded', now()) FROM (SELECT NULL::workhorse.job_runtime AS r) x`,
      `SELECT workhorse.requeue_job('${owner.jobId}', now(), now(), NULL, 0)`,
      `SELECT workhorse.lock_owned('${owner.jobId}', 'x', 1)`,
      "SELECT workhorse.ensure_history_partition('job_event', 'at', current_date + 40)",
    ];
    const codes: Record<string, string> = {};
    for (const text of refused) codes[text] = await sqlstateOf(appClient, text);
    expect(codes).toEqual(Object.fromEntries(refused.map((text) => [text, '42501'])));
    // And nothing changed: the live job is still its owner's, and its key still answers.
    expect(await admin.getJob(id)).toMatchObject({ state: 'canceled', payload: {} });
    expect(await admin.getJob(live)).toMatchObject({ state: 'active', workerId: 'app-guarded-worker' });
    expect(await queue.enqueue('app.guarded', { live: true }, { queue: 'app-guarded-live', idempotencyKey: 'guarded' })).toBe(live);
    const { rows } = await appPool.query<{ status: string }>('SELECT workhorse.complete_v1($1, $2, $3, $4) AS status', [
      owner.jobId,
      owner.workerId,
      owner.fence,
      '"done"',
    ]);
    expect(rows[0].status).toBe('succeeded');
  });

  it('holds no privilege on any relation of the schema but reading schema_version, and may execute every protocol function and nothing else', async () => {
    const { rows } = await db.pool.query<{ name: string; privileges: string }>(
      `SELECT c.relname AS name,
              concat_ws(',',
                CASE WHEN c.relkind = 'S' THEN
                  concat_ws(',', CASE WHEN has_sequence_privilege($1, c.oid, 'USAGE') THEN 'USAGE' END,
                                 CASE WHEN has_sequence_privilege($1, c.oid, 'SELECT') THEN 'SELECT' END,
                                 CASE WHEN has_sequence_privilege($1, c.oid, 'UPDATE') THEN 'UPDATE' END)
                ELSE
                  concat_ws(',', CASE WHEN has_table_privilege($1, c.oid, 'SELECT') THEN 'SELECT' END,
                                 CASE WHEN has_table_privilege($1, c.oid, 'INSERT') THEN 'INSERT' END,
                                 CASE WHEN has_table_privilege($1, c.oid, 'UPDATE') THEN 'UPDATE' END,
                                 CASE WHEN has_table_privilege($1, c.oid, 'DELETE') THEN 'DELETE' END,
                                 CASE WHEN has_table_privilege($1, c.oid, 'TRUNCATE') THEN 'TRUNCATE' END,
                                 CASE WHEN has_table_privilege($1, c.oid, 'REFERENCES') THEN 'REFERENCES' END,
                                 CASE WHEN has_table_privilege($1, c.oid, 'TRIGGER') THEN 'TRIGGER' END)
                END) AS privileges
       FROM pg_class c
       WHERE c.relnamespace = 'workhorse'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
       ORDER BY c.relname`,
      [appRole],
    );
    const granted = Object.fromEntries(rows.filter((r) => r.privileges !== '').map((r) => [r.name, r.privileges]));
    expect(granted).toEqual({ schema_version: 'SELECT' });
    const { rows: functions } = await db.pool.query<{ name: string; executable: boolean }>(
      `SELECT p.proname AS name, has_function_privilege($1, p.oid, 'EXECUTE') AS executable
       FROM pg_proc p WHERE p.pronamespace = 'workhorse'::regnamespace ORDER BY 1`,
      [appRole],
    );
    expect(functions.filter((f) => f.executable).map((f) => f.name)).toEqual(functions.map((f) => f.name).filter((n) => /_v\d+$/.test(n)));
  });

  it('takes back table privileges a role held before (an earlier release granted them)', async () => {
    const role = await roles.create(db.url);
    await db.pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON workhorse.job_runtime, workhorse.job_outcome TO ${role.name}`);
    await db.pool.query(`GRANT USAGE, SELECT ON SEQUENCE workhorse.fence_seq TO ${role.name}`);
    await grantRole(db.pool, role.name, 'worker');
    const { rows } = await db.pool.query<{ runtime: boolean; outcome: boolean; fence: boolean }>(
      `SELECT has_table_privilege($1, 'workhorse.job_runtime', 'SELECT, INSERT, UPDATE, DELETE') AS runtime,
              has_table_privilege($1, 'workhorse.job_outcome', 'SELECT, INSERT, UPDATE, DELETE') AS outcome,
              has_sequence_privilege($1, 'workhorse.fence_seq', 'USAGE, SELECT') AS fence`,
      [role.name],
    );
    expect(rows[0]).toEqual({ runtime: false, outcome: false, fence: false });
  });

  it('refuses a role that does not exist, no role name, or capabilities it does not know, and is idempotent', async () => {
    await expect(grantAppRole(db.pool, `wh_missing_${randomBytes(4).toString('hex')}`)).rejects.toMatchObject({ code: '42704' });
    await expect(grantAppRole(db.pool, '')).rejects.toBeInstanceOf(WorkhorseValidationError);
    for (const capabilities of [[], ['admin'], ['worker', 'worker'], 'producer,worker', null]) {
      await expect(grantRole(db.pool, appRole, capabilities as never)).rejects.toMatchObject({ field: 'capabilities' });
    }
    await expect(grantAppRole(db.pool, appRole)).resolves.toBeUndefined();
  });
});

describe('docs/least-privilege.sql', () => {
  it('holds exactly the grants that grantRole runs', () => {
    const script = readFileSync(DOCS_SCRIPT, 'utf8').replace(/\r\n/g, '\n');
    expect(script).toContain(GRANT_ROLE_SQL);
    expect(script).toContain(
      "SELECT set_config('workhorse.grant_role', :'role', false), set_config('workhorse.grant_capabilities', :'capabilities', false);",
    );
  });

  const psql = findPsql();
  itIf({ met: psql !== null, missing: 'psql is not installed (apt-get install postgresql-client)' }, 'runs under psql -v role=... [-v capabilities=...]', async () => {
    const all = await roles.create(db.url);
    const producer = await roles.create(db.url);
    for (const args of [['-v', `role=${all.name}`], ['-v', `role=${producer.name}`, '-v', 'capabilities=producer']]) {
      const result = spawnSync(psql as string, [db.url, '-X', '-q', '-v', 'ON_ERROR_STOP=1', ...args, '-f', DOCS_SCRIPT], {
        encoding: 'utf8',
      });
      expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    }
    const { rows } = await db.pool.query<{ role: string; enqueue: boolean; claim: boolean; admin: boolean; runtime: boolean; create: boolean }>(
      `SELECT r AS role,
              has_function_privilege(r, 'workhorse.enqueue_many_v1(jsonb)', 'EXECUTE') AS enqueue,
              has_function_privilege(r, 'workhorse.claim_many_v1(text[], text, integer, integer)', 'EXECUTE') AS claim,
              has_function_privilege(r, 'workhorse.get_job_v1(uuid)', 'EXECUTE') AS admin,
              has_table_privilege(r, 'workhorse.job_runtime', 'SELECT, UPDATE') AS runtime,
              has_schema_privilege(r, 'workhorse', 'CREATE') AS create
       FROM unnest($1::text[]) AS r`,
      [[all.name, producer.name]],
    );
    expect(rows).toEqual([
      { role: all.name, enqueue: true, claim: true, admin: true, runtime: false, create: false },
      { role: producer.name, enqueue: true, claim: false, admin: false, runtime: false, create: false },
    ]);
  });
});
