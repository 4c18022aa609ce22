import type { Pool } from 'pg';

/**
 * The split invariant: every job has exactly one `job_runtime` row or one `job_outcome` row,
 * never both and never neither, and no runtime or outcome row exists without its job (the
 * tables have no foreign key; the protocol functions keep this). Returns the offending job ids
 * (empty when it holds).
 */
export async function splitViolations(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(`
    SELECT j.id
    FROM workhorse.job j
    LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
    LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id
    WHERE (r.job_id IS NULL) = (o.job_id IS NULL)
    UNION ALL
    SELECT r.job_id FROM workhorse.job_runtime r WHERE NOT EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = r.job_id)
    UNION ALL
    SELECT o.job_id FROM workhorse.job_outcome o WHERE NOT EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = o.job_id)`);
  return rows.map((r) => r.id);
}

/**
 * The attempt history: every attempt a job opened and closed has exactly one `attempt_history`
 * row under its own number, and no other rows exist. A job that started `n` attempts has closed
 * attempts 1 to n, except the one still open (running, or asleep: `resuming` outside
 * `active`). Returns the offending `job id: attempt` pairs (empty when it holds).
 */
export async function attemptHistoryViolations(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ item: string }>(`
    WITH started AS (
      SELECT r.job_id, r.current_attempt AS n, (r.state = 'active' OR r.resuming) AS open FROM workhorse.job_runtime r
      UNION ALL
      SELECT o.job_id, o.final_attempt, false FROM workhorse.job_outcome o
    ),
    closed AS (
      SELECT s.job_id, a.attempt FROM started s, generate_series(1, s.n - CASE WHEN s.open THEN 1 ELSE 0 END) AS a (attempt)
    ),
    -- History is kept by day (retention drops whole partitions): the rows of a job that retention
    -- removed stay until their day goes, so only jobs that exist are checked.
    recorded AS (
      SELECT h.job_id, h.attempt, count(*) AS rows FROM workhorse.attempt_history h
      WHERE EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = h.job_id)
      GROUP BY h.job_id, h.attempt
    )
    SELECT coalesce(c.job_id, h.job_id) || ': ' || coalesce(c.attempt, h.attempt) || ' has '
           || coalesce(h.rows, 0) || ' rows' AS item
    FROM closed c
    FULL JOIN recorded h ON h.job_id = c.job_id AND h.attempt = c.attempt
    WHERE c.job_id IS NULL OR h.job_id IS NULL OR h.rows <> 1
    ORDER BY 1`);
  return rows.map((r) => r.item);
}

/** Fails the test if any job breaks the split invariant or the attempt history's. */
export async function expectSplitInvariant(pool: Pool): Promise<void> {
  expect(await splitViolations(pool)).toEqual([]);
  expect(await attemptHistoryViolations(pool)).toEqual([]);
}
