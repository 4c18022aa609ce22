/**
 * Issue 30, defects 7 and 9: retention cannot remove a finished prerequisite that an enqueue
 * still in flight names (the enqueue locks it); `drop_history_before_v1` refuses a cutoff later
 * than the retention window; every human decision and operator change records the login role
 * next to the caller-chosen actor, and the timeline shows it.
 */
import type { Client } from 'pg';
import { grantRole } from '../../lib/core/grants';
import { claimOne, complete } from '../support/protocol';
import { clientFor, type LoginRole } from '../support/roles';
import { useTestDatabase } from '../support/test-database';

const opened: Client[] = [];
const { db, pool, queue, admin, roles } = useTestDatabase({
  afterEachTest: async () => {
    for (const client of opened.splice(0)) await client.end().catch(() => undefined);
  },
});

let operator: LoginRole;
let producer: LoginRole;

beforeAll(async () => {
  operator = await roles.create(db.url, 'wh_operator');
  producer = await roles.create(db.url, 'wh_producer');
  await grantRole(db.pool, operator.name, 'operator');
  await grantRole(db.pool, producer.name, 'producer');
});

async function session(role: LoginRole): Promise<Client> {
  const client = await clientFor(role.url);
  opened.push(client);
  await client.query("SET statement_timeout = '5s'");
  return client;
}

it('retention keeps a finished prerequisite that an open enqueue names; the dependent then sees it finished', async () => {
  await admin.setRetention({ finishedJobMs: 1000 });
  try {
    const prerequisite = await queue.enqueue('pre', {}, { queue: 'guards-pre' });
    await complete(pool, await claimOne(pool, 'guards-pre'), { ok: 1 });
    await new Promise((resolve) => setTimeout(resolve, 1200));

    const producing = await session(producer);
    await producing.query('BEGIN');
    const { rows } = await producing.query<{ job_id: string }>('SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)', [
      JSON.stringify([{ type: 'dep', queue: 'guards-dep', payload: {}, dependsOn: [prerequisite] }]),
    ]);
    const dependent = rows[0].job_id;
    // Retention runs while the enqueue is still open: it must not take the prerequisite.
    await pool.query('SELECT workhorse.retention_run_v1(1000, true)');
    expect(await admin.getJob(prerequisite)).toMatchObject({ state: 'succeeded' });
    await producing.query('COMMIT');

    // Later passes keep it too: a live dependent names it.
    await pool.query("UPDATE workhorse.retention_deferred SET recheck_at = clock_timestamp() - interval '1 second'");
    await pool.query('SELECT workhorse.retention_run_v1(1000, true)');
    const job = await claimOne(pool, 'guards-dep');
    expect(job.jobId).toBe(dependent);
    const deps = await pool.query('SELECT job_id, state, result FROM workhorse.dependencies_v1($1)', [dependent]);
    expect(deps.rows).toEqual([{ job_id: prerequisite, state: 'succeeded', result: { ok: 1 } }]);
    await complete(pool, job);
  } finally {
    await admin.setRetention({ finishedJobMs: 2_592_000_000 });
  }
});

describe('drop_history_before_v1', () => {
  it('refuses a cutoff later than the retention window, by name, dropping nothing', async () => {
    const count = async () =>
      Number((await pool.query("SELECT count(*) AS n FROM pg_class WHERE relname ~ '^(job_event|attempt_history)_p[0-9]{8}$'")).rows[0].n);
    const before = await count();
    const ops = await session(operator);
    for (const cutoff of ["clock_timestamp() + interval '30 days'", 'clock_timestamp()', "clock_timestamp() - interval '13 days'"]) {
      const error = await ops.query(`SELECT workhorse.drop_history_before_v1(${cutoff})`).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'P1001', column: 'before' });
    }
    expect(await count()).toBe(before);
    // At the window's edge (14 days by default, whole UTC days) it drops what is older.
    const edge = await ops.query<{ n: number }>(
      "SELECT workhorse.drop_history_before_v1(((clock_timestamp() AT TIME ZONE 'UTC')::date - 14)::timestamp AT TIME ZONE 'UTC') AS n",
    );
    expect(edge.rows[0].n).toBe(0);
    // A shorter window moves the edge.
    await admin.setRetention({ jobEventDays: 2, attemptHistoryDays: 2 });
    try {
      await expect(ops.query("SELECT workhorse.drop_history_before_v1(clock_timestamp() - interval '2 days')")).resolves.toBeDefined();
      const late = await ops.query("SELECT workhorse.drop_history_before_v1(clock_timestamp() - interval '1 day')").catch((e: unknown) => e);
      expect(late).toMatchObject({ code: 'P1001', column: 'before' });
    } finally {
      await admin.setRetention({ jobEventDays: 14, attemptHistoryDays: 14 });
    }
  });
});

describe('attribution: the login role next to the caller-chosen actor', () => {
  it('an operator change records the login role in the timeline, whatever actor the caller names', async () => {
    const id = await queue.enqueue('t', {}, { queue: 'guards-attr' });
    const ops = await session(operator);
    await ops.query("SELECT workhorse.cancel_v1($1, 'not needed', 'alice')", [id]);
    const { items } = await admin.getJobTimeline(id);
    const canceled = items.find((entry) => entry.kind === 'canceled');
    expect(canceled).toMatchObject({ source: 'event', loginRole: operator.name, data: { error: { name: 'Canceled', actor: 'alice' } } });
    // The events written by the owner's own session carry its login role too.
    expect(items.find((entry) => entry.kind === 'enqueued')?.loginRole).toEqual(expect.any(String));
    // And through the SQL function itself.
    const rows = await ops.query<{ kind: string; login_role: string }>('SELECT kind, login_role FROM workhorse.get_timeline_v2($1)', [id]);
    expect(rows.rows.find((r) => r.kind === 'canceled')?.login_role).toBe(operator.name);
  });

  it('a human decision recorded by a producer role carries that role, beside the actor it names', async () => {
    const jobId = await queue.enqueue('refund.review', {}, { queue: 'guards-human' });
    const claimed = await claimOne(pool, 'guards-human');
    await pool.query("SELECT status FROM workhorse.wait_human_v1($1, $2, $3, 'approve', '{}'::jsonb, NULL, NULL)", [
      jobId,
      claimed.workerId,
      claimed.fence,
    ]);
    const deciding = await session(producer);
    const { rows } = await deciding.query<{ status: string }>(
      "SELECT workhorse.complete_human_wait_v1($1, 'approve', '\"yes\"'::jsonb, 'alice') AS status",
      [jobId],
    );
    expect(rows[0].status).toBe('completed');
    const decided = (await admin.getJobTimeline(jobId)).items.find((entry) => entry.kind === 'human_decided');
    expect(decided).toMatchObject({ loginRole: producer.name, data: expect.objectContaining({ actor: 'alice', decision: 'yes' }) });
  });

  it('a schedule change records the login role of the producer that synced it', async () => {
    const other = await session(producer);
    await other.query("SELECT * FROM workhorse.sync_schedules_v1('guards', $1::jsonb, 'deploy-bot')", [
      JSON.stringify([{ key: 'k', cron: '0 3 * * *', type: 'report', payload: {} }]),
    ]);
    const { rows } = await pool.query<{ actor: string; login_role: string }>(
      "SELECT h.actor, h.login_role FROM workhorse.schedule_history h JOIN workhorse.schedule s ON s.id = h.schedule_id WHERE s.namespace = 'guards'",
    );
    expect(rows).toEqual([{ actor: 'deploy-bot', login_role: producer.name }]);
  });
});
