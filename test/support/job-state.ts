import type { Pool } from 'pg';

/**
 * The job's state read straight from the tables, from whichever side of the split holds it
 * (`job_runtime` or `job_outcome`); null when no such job is committed. For tests that check
 * what the protocol wrote without going through `Admin`.
 */
export async function stateOf(pool: Pool, jobId: string): Promise<string | null> {
  const { rows } = await pool.query<{ state: string }>(
    `SELECT coalesce(r.state, o.state) AS state FROM workhorse.job j
     LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
     LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id
     WHERE j.id = $1`,
    [jobId],
  );
  return rows[0]?.state ?? null;
}
