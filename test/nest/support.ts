/**
 * Shared helpers of the Nest tests: quiet Nest logs, start a module, and read a job's state
 * straight from the tables.
 */
import { Logger, type ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Pool } from 'pg';

/** Nest's own logs would drown the test output; tests that check logs spy on Logger.prototype. */
export function quietNestLogs(): void {
  Logger.overrideLogger(false);
}

/** The job's state read from the tables (null when no such job is committed). */
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

/** How many committed jobs of this type exist. */
export async function countJobs(pool: Pool, type: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM workhorse.job WHERE type = $1', [type]);
  return rows[0].n;
}

/** Compiles and initialises a testing module (hooks run: discovery, bootstrap). */
export async function startModule(metadata: ModuleMetadata): Promise<TestingModule> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  try {
    await moduleRef.init();
  } catch (error) {
    await moduleRef.close();
    throw error;
  }
  return moduleRef;
}
