/**
 * What the server writes into a schedule's plan (plan_schedule, sql/085_schedules.sql, which the
 * tick, a sync and a resume run), at a chosen "now": the occurrences of the next minute and at
 * least the next one however far, replan_at at the last of them, and which missed occurrences
 * are planned after an outage, per catch-up mode. (Which times an expression gives, daylight
 * saving included, is test/core/cron.test.ts with the shared vectors.)
 */
import type { ScheduleDefinition } from '../../lib/core';
import { useTestDatabase } from '../support/test-database';

const { pool, queue } = useTestDatabase();

let counter = 0;

/**
 * Syncs one schedule, then plans it as the tick would at `now` with its plan ending at
 * `plannedThrough` (its planned occurrences dropped first). Returns the planned times and replan_at.
 */
async function plan(
  definition: Omit<ScheduleDefinition, 'key' | 'type'>,
  plannedThrough: string,
  now = plannedThrough,
): Promise<{ planned: string[]; replanAt: string | null }> {
  const key = `plan-${++counter}`;
  await queue.syncSchedules('plans', [{ key, type: 'plan.job', ...definition }], undefined);
  const { rows } = await pool.query<{ id: string }>(`SELECT id FROM workhorse.schedule WHERE namespace = 'plans' AND key = $1`, [key]);
  const id = rows[0].id;
  await pool.query(`DELETE FROM workhorse.schedule_occurrence WHERE schedule_id = $1`, [id]);
  await pool.query(`UPDATE workhorse.schedule SET planned_through = $2 WHERE id = $1`, [id, plannedThrough]);
  await pool.query(`SELECT workhorse.plan_schedule(s, $2) FROM workhorse.schedule s WHERE s.id = $1`, [id, now]);
  const planned = await pool.query<{ at: Date }>(`SELECT at FROM workhorse.schedule_occurrence WHERE schedule_id = $1 ORDER BY at`, [id]);
  const replan = await pool.query<{ replan_at: Date | null }>(`SELECT replan_at FROM workhorse.schedule WHERE id = $1`, [id]);
  return { planned: planned.rows.map((r) => r.at.toISOString()), replanAt: replan.rows[0].replan_at?.toISOString() ?? null };
}

describe('the plan', () => {
  it('holds the occurrences of the next minute, and the tick plans again at the last of them', async () => {
    const { planned, replanAt } = await plan({ cron: '*/10 * * * * *' }, '2026-01-01T00:00:30.250Z');
    expect(planned).toEqual([
      '2026-01-01T00:00:40.000Z',
      '2026-01-01T00:00:50.000Z',
      '2026-01-01T00:01:00.000Z',
      '2026-01-01T00:01:10.000Z',
      '2026-01-01T00:01:20.000Z',
      '2026-01-01T00:01:30.000Z',
    ]);
    expect(replanAt).toBe('2026-01-01T00:01:30.000Z');
  });

  it('a per-second schedule: 60 occurrences', async () => {
    const { planned } = await plan({ cron: '* * * * * *' }, '2026-01-01T00:00:00Z');
    expect(planned.length).toBe(60);
  });

  it('always holds the next occurrence, however far: a yearly one, and Feb 29 two years ahead', async () => {
    expect(await plan({ cron: '@yearly' }, '2026-06-01T00:00:00Z')).toEqual({
      planned: ['2027-01-01T00:00:00.000Z'],
      replanAt: '2027-01-01T00:00:00.000Z',
    });
    expect((await plan({ cron: '0 0 29 2 *' }, '2026-06-01T00:00:00Z')).planned).toEqual(['2028-02-29T00:00:00.000Z']);
  });

  it('reads the expression in the schedule zone', async () => {
    expect((await plan({ cron: '0 6 * * *', timezone: 'Europe/Berlin' }, '2026-07-01T00:00:00Z')).planned).toEqual(['2026-07-01T04:00:00.000Z']);
  });
});

describe('after an outage longer than the plan (plan ended 10 minutes ago; missed after 60 s)', () => {
  const now = '2026-01-01T12:00:30Z';
  const ended = '2026-01-01T11:50:30Z';
  const planned = async (catchUp: 'skip' | 'latest' | 'all', catchUpLimit = 100) =>
    (await plan({ cron: '* * * * *', catchUp, catchUpLimit }, ended, now)).planned;

  it('skip: plans from one grace period ago, nothing missed', async () => {
    expect(await planned('skip')).toEqual(['2026-01-01T12:00:00.000Z', '2026-01-01T12:01:00.000Z']);
  });

  it('latest: the most recent missed occurrence, then on', async () => {
    expect(await planned('latest')).toEqual(['2026-01-01T11:59:00.000Z', '2026-01-01T12:00:00.000Z', '2026-01-01T12:01:00.000Z']);
  });

  it('all: the most recent catchUpLimit missed occurrences, never before the plan ended', async () => {
    expect(await planned('all', 3)).toEqual([
      '2026-01-01T11:57:00.000Z',
      '2026-01-01T11:58:00.000Z',
      '2026-01-01T11:59:00.000Z',
      '2026-01-01T12:00:00.000Z',
      '2026-01-01T12:01:00.000Z',
    ]);
    const all = await planned('all', 1000);
    expect(all[0]).toBe('2026-01-01T11:51:00.000Z');
    expect(all.filter((at) => Date.parse(at) <= Date.parse(now) - 60_000).length).toBe(9);
  });

  it('an occurrence exactly at the grace boundary is planned once', async () => {
    const exact = await plan({ cron: '* * * * * *', catchUp: 'all', catchUpLimit: 2 }, '2026-01-01T12:00:00Z', '2026-01-01T12:02:00Z');
    // Boundary 12:01:00: missed are 12:00:59 and 12:01:00, then 12:01:01 on.
    expect(exact.planned.slice(0, 4)).toEqual(['2026-01-01T12:00:59.000Z', '2026-01-01T12:01:00.000Z', '2026-01-01T12:01:01.000Z', '2026-01-01T12:01:02.000Z']);
  });

  it('a per-second schedule missed for a day, all with the largest limit: the last 1000 seconds', async () => {
    const day = await plan({ cron: '* * * * * *', catchUp: 'all', catchUpLimit: 1000 }, '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z');
    const missed = day.planned.filter((at) => Date.parse(at) <= Date.parse('2026-01-01T23:59:00Z'));
    expect(missed.length).toBe(1000);
    expect(missed[999]).toBe('2026-01-01T23:59:00.000Z');
  });
});

describe('a schedule that cannot be planned', () => {
  it('never fails the tick: the error goes on the schedule, planning is tried again an hour later, the others go on', async () => {
    await queue.syncSchedules('unplannable', [
      { key: 'broken', type: 'plan.broken', cron: '* * * * * *' },
      { key: 'fine', type: 'plan.fine', cron: '* * * * * *' },
    ]);
    // As if the zone had gone from a newer time zone database after the sync.
    await pool.query(
      `UPDATE workhorse.schedule SET definition = jsonb_set(definition, '{timezone}', '"Gone/Away"'), replan_at = '-infinity'
       WHERE namespace = 'unplannable' AND key = 'broken'`,
    );
    await pool.query(`UPDATE workhorse.schedule SET replan_at = '-infinity' WHERE namespace = 'unplannable' AND key = 'fine'`);
    // Without the occurrences the sync planned (in UTC): one of them falling due would fire in
    // this tick, and a fired occurrence clears the schedule's error.
    await pool.query(
      `DELETE FROM workhorse.schedule_occurrence o USING workhorse.schedule s
       WHERE o.schedule_id = s.id AND s.namespace = 'unplannable' AND s.key = 'broken'`,
    );
    const { rows } = await pool.query<{ tick: { skipped: boolean; schedulesPlanned: number } }>('SELECT workhorse.tick_v1() AS tick');
    // (Other schedules of this file may be planned by the same tick.)
    expect(rows[0].tick.skipped).toBe(false);
    expect(rows[0].tick.schedulesPlanned).toBeGreaterThanOrEqual(1);
    const states = await pool.query<{ key: string; last_error: string | null; retry_in_minutes: number }>(
      `SELECT key, last_error, round(extract(epoch FROM replan_at - clock_timestamp()) / 60)::int AS retry_in_minutes
       FROM workhorse.schedule WHERE namespace = 'unplannable' ORDER BY key`,
    );
    expect(states.rows[0]).toMatchObject({ key: 'broken', retry_in_minutes: 60 });
    expect(states.rows[0].last_error).toMatch(/^planning: .*Gone\/Away/);
    expect(states.rows[1]).toMatchObject({ key: 'fine', last_error: null });
    const fine = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM workhorse.schedule_occurrence o JOIN workhorse.schedule s ON s.id = o.schedule_id
       WHERE s.namespace = 'unplannable' AND s.key = 'fine' AND o.state = 'planned' AND o.at > clock_timestamp()`,
    );
    expect(fine.rows[0].n).toBeGreaterThan(50);
  });
});
