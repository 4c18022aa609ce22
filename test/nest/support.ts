/**
 * Shared helpers of the Nest tests: quiet Nest logs, start a module, count jobs of a type.
 */
import { Logger, type ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import type { Pool } from 'pg';

/** Nest's own logs would drown the test output; tests that check logs spy on Logger.prototype. */
export function quietNestLogs(): void {
  Logger.overrideLogger(false);
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
