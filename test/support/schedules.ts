/**
 * Reads of a schedule's occurrences for tests: what the barrier table holds (which occurrence
 * fired which job, which were skipped and why), and the jobs the schedule enqueued.
 */
import type { Pool } from 'pg';

export interface OccurrenceRow {
  at: Date;
  state: 'planned' | 'fired' | 'skipped';
  reason: 'missed' | 'overlap' | 'paused' | null;
  job_id: string | null;
  revision: number | null;
}

/** Every occurrence row of the schedule, in time order. */
export async function occurrencesOf(pool: Pool, key: string, namespace = 'default'): Promise<OccurrenceRow[]> {
  const { rows } = await pool.query<OccurrenceRow>(
    `SELECT o.at, o.state, o.reason, o.job_id, o.revision
     FROM workhorse.schedule_occurrence o JOIN workhorse.schedule s ON s.id = o.schedule_id
     WHERE s.namespace = $1 AND s.key = $2 ORDER BY o.at`,
    [namespace, key],
  );
  return rows;
}

/** The occurrences that are decided (fired or skipped), in time order. */
export async function decidedOccurrencesOf(pool: Pool, key: string, namespace = 'default'): Promise<OccurrenceRow[]> {
  return (await occurrencesOf(pool, key, namespace)).filter((o) => o.state !== 'planned');
}

/** The jobs of one type, oldest first, with the occurrence each `schedule_fired` event names. */
export async function scheduledJobsOf(pool: Pool, type: string): Promise<{ id: string; payload: unknown; occurrence: string | null }[]> {
  const { rows } = await pool.query<{ id: string; payload: unknown; occurrence: string | null }>(
    `SELECT j.id, j.payload, e.data ->> 'occurrence' AS occurrence
     FROM workhorse.job j
     LEFT JOIN workhorse.job_event e ON e.job_id = j.id AND e.kind = 'schedule_fired'
     WHERE j.type = $1 ORDER BY j.seq`,
    [type],
  );
  return rows;
}

/**
 * Moves a schedule's plan into the past, as if every worker had been down since `ms` ago and no
 * one had planned or fired anything since: its planned occurrences are dropped and its plan ends
 * then, due for planning.
 */
export async function simulateOutage(pool: Pool, key: string, ms: number, namespace = 'default'): Promise<void> {
  await pool.query(
    `WITH s AS (SELECT id FROM workhorse.schedule WHERE namespace = $1 AND key = $2),
     dropped AS (DELETE FROM workhorse.schedule_occurrence o USING s WHERE o.schedule_id = s.id AND o.state = 'planned')
     UPDATE workhorse.schedule SET planned_through = date_trunc('milliseconds', clock_timestamp()) - $3 * interval '1 millisecond',
                                   replan_at = '-infinity'
     WHERE id = (SELECT id FROM s)`,
    [namespace, key, ms],
  );
}
