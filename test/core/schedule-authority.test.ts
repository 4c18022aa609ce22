/**
 * Issue 30, defect 2: a worker-only role (docs/security.md: a worker cannot enqueue, nor touch
 * schedules) could hand plan_schedule_v1 any occurrences and `replan_at = NULL`, and so make a
 * daily schedule enqueue 2,000 jobs in two seconds and never be planned again. The function is
 * kept for the previous release's workers, but the plan is the server's: whatever a worker sends,
 * the schedule fires only its own expression's occurrences, and stays planned.
 */
import type { Pool } from 'pg';
import { grantRole } from '../../lib/core';
import { poolFor } from '../support/roles';
import { useTestDatabase } from '../support/test-database';

const { db, pool, queue, roles } = useTestDatabase({
  beforeDrop: () => Promise.all(opened.splice(0).map((p) => p.end())),
});
const opened: Pool[] = [];

async function workerPool(): Promise<Pool> {
  const role = await roles.create(db.url, 'wh_w');
  await grantRole(pool, role.name, ['worker']);
  const workerRole = poolFor(role.url);
  opened.push(workerRole);
  return workerRole;
}

interface PlanRow {
  id: string;
  revision: number;
  planned_through: Date;
}

async function scheduleRow(key: string): Promise<PlanRow> {
  const { rows } = await pool.query<PlanRow>(
    `SELECT id, revision, planned_through FROM workhorse.schedule WHERE namespace = 'authority' AND key = $1`,
    [key],
  );
  return rows[0];
}

async function jobsOfType(type: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM workhorse.job WHERE type = $1', [type]);
  return Number(rows[0].n);
}

/** 2,000 occurrences over the next two seconds (after the plan's end), and replan_at null: what the attack sent. */
const forgedPlan = `SELECT workhorse.plan_schedule_v1($1, $2, $3,
  ARRAY(SELECT greatest($3::timestamptz, clock_timestamp()) + g * interval '1 millisecond' FROM generate_series(1, 2000) AS g), NULL) AS status`;

describe('plan_schedule_v1 as a worker-only role', () => {
  it('cannot make a daily schedule fire anything but its own occurrences, nor stop its planning', async () => {
    const workerRole = await workerPool();
    // Synced as a client in another language does: the SQL call alone.
    await pool.query(`SELECT * FROM workhorse.sync_schedules_v1('authority', $1::jsonb)`, [
      JSON.stringify([{ key: 'daily', type: 'authority.daily', cron: '0 6 * * *', timezone: 'Europe/Berlin' }]),
    ]);
    // The worker learns the plan to extend as a planner does (or, when nothing is due, from the owner).
    const due = await workerRole.query<{ schedule_id: string; revision: number; planned_through: Date }>(
      `SELECT schedule_id, revision, planned_through FROM workhorse.schedules_to_plan_v1(100, 'authority')`,
    );
    const target: PlanRow = due.rows[0]
      ? { id: due.rows[0].schedule_id, revision: due.rows[0].revision, planned_through: due.rows[0].planned_through }
      : await scheduleRow('daily');
    await workerRole.query(forgedPlan, [target.id, target.revision, target.planned_through]);
    // Again while it is due for planning (as after an outage).
    await pool.query(`UPDATE workhorse.schedule SET replan_at = '-infinity' WHERE id = $1`, [target.id]);
    const current = await scheduleRow('daily');
    await workerRole.query(forgedPlan, [current.id, current.revision, current.planned_through]);
    await new Promise((resolve) => setTimeout(resolve, 2100));
    for (let i = 0; i < 3; i++) await pool.query('SELECT workhorse.tick_v1()');

    expect(await jobsOfType('authority.daily')).toBe(0);
    const { rows } = await pool.query<{ at: Date; state: string; replan_at: Date | null; local: string }>(
      `SELECT o.at, o.state, s.replan_at, to_char(o.at AT TIME ZONE 'Europe/Berlin', 'HH24:MI:SS') AS local
       FROM workhorse.schedule_occurrence o JOIN workhorse.schedule s ON s.id = o.schedule_id
       WHERE s.id = $1 ORDER BY o.at`,
      [target.id],
    );
    // Its plan is the server's: days at 06:00 in Berlin, and it is planned on from the last one.
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length).toBeLessThanOrEqual(2);
    expect(new Set(rows.map((r) => `${r.state} ${r.local}`))).toEqual(new Set(['planned 06:00:00']));
    expect(rows[0].replan_at?.getTime()).toBe(rows[rows.length - 1].at.getTime());
  });
});
