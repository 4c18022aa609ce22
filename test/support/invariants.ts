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

/** Fails the test if any job breaks the split invariant. */
export async function expectSplitInvariant(pool: Pool): Promise<void> {
  expect(await splitViolations(pool)).toEqual([]);
}
